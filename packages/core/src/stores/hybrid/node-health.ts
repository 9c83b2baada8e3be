import calculateSlot from 'cluster-key-slot'
import type { RedisConnection } from '../../redis-clients/connection.js'

/**
 * Whether each Redis node a HybridStore syncs with answers, and since when it last did. On a
 * Cluster a master that stops answering fails only its own slots' keys: those go to the outage
 * policy, and a key whose master answers is decided on its totals as ever (judged as a whole, one
 * failed master would send every key to the policy, and keys whose master never failed with them:
 * test/tests/hybrid-cluster.test.ts). Off a Cluster there is one node.
 */
export class NodeHealth {
  /** Nodes whose last exchange with this store failed, with when each last answered (the store's clock). */
  private readonly failingSince = new Map<string, number>()
  /** A key each failing node serves: a sync that has nothing else for it asks it about that key. */
  private readonly probeKeys = new Map<string, string>()
  private readonly answeredAt = new Map<string, number>()

  private readonly cluster: boolean

  constructor(
    private readonly connection: RedisConnection,
    private readonly startedAt: number,
  ) {
    this.cluster = connection.cluster
  }

  /** The node that serves a key: a master's `host:port`, or the slot itself before the Cluster's first slot map. */
  nodeOf(key: string): string {
    if (!this.cluster) return ''
    const slot = calculateSlot(key)
    return this.masterOfSlot(slot) ?? `slot ${slot}`
  }

  /** The master serving `key` as the client last learned it ('' off a Cluster); undefined while it knows none. */
  masterOf(key: string): string | undefined {
    return this.cluster ? this.masterOfSlot(calculateSlot(key)) : ''
  }

  /** The master serving `slot` as the client last learned it; undefined while it knows none, and off a Cluster. */
  readonly masterOfSlot = (slot: number): string | undefined => this.connection.masterOfSlot(slot)

  /** Whether any node's last exchange failed. */
  get failing(): boolean {
    return this.failingSince.size > 0
  }

  answered(node: string, at: number): void {
    this.answeredAt.set(node, at)
    this.failingSince.delete(node)
    this.probeKeys.delete(node)
  }

  /** The node failed on `key`, a key it serves. */
  failed(node: string, key: string): void {
    if (!this.failingSince.has(node)) this.failingSince.set(node, this.lastAnswer(node))
    this.probeKeys.set(node, key)
  }

  /** Each failing node, with a key it serves. */
  probes(): IterableIterator<[node: string, key: string]> {
    return this.probeKeys.entries()
  }

  /** Whether the node's last exchange failed. */
  isFailing(node: string): boolean {
    return this.failingSince.has(node)
  }

  /** Whether the node failed and has not answered for more than `afterMs` at `now`. */
  isDown(node: string, now: number, afterMs: number): boolean {
    const since = this.failingSince.get(node)
    return since !== undefined && now - since > afterMs
  }

  /** Whether some node is down at `now`. */
  anyDown(now: number, afterMs: number): boolean {
    for (const since of this.failingSince.values()) if (now - since > afterMs) return true
    return false
  }

  private lastAnswer(node: string): number {
    return this.answeredAt.get(node) ?? this.startedAt
  }
}
