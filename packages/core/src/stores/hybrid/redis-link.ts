import { randomBytes } from 'node:crypto'
import calculateSlot from 'cluster-key-slot'
import { KeyBuilder } from '../../rules/keys.js'
import { syncScript } from '../../scripts/generated.js'
import { timeFrom } from '../../support/clock.js'
import { isStoreDown, TollgateError } from '../../support/errors.js'
import { ClientErrors } from '../shared/client-errors.js'
import { type ConnectionWatch, ReplyWatches } from '../shared/reply-watch.js'
import type { StoreReceiver, StoreTarget } from '../store.js'
import { ServerAlignedClock } from './clock.js'
import { hybridInstancesKey } from './instances.js'
import { NodeHealth } from './node-health.js'
import type { HybridConfig } from './options.js'
import type { ChunkOutcome, SyncCommand } from './sync-wire.js'

/**
 * What both of a HybridStore's modes share about talking to Redis: the script calls and each
 * connection's silence, whether each node answers, the store's clock (injected, or aligned to
 * Redis's `TIME`), the processes Redis counts, and the failure a decision or a sync reports.
 */
export class RedisLink {
  readonly keys: KeyBuilder
  readonly cluster: boolean
  /** The connections' silence, which bounds a decision waiting on Redis (a read, a lease, a sync). */
  readonly watches: ReplyWatches
  /** Whether each node's last exchange with this store (a sync, a read, a lease round trip) reached it, and when one last did. */
  readonly health: NodeHealth
  readonly errors: ClientErrors
  readonly aligned: ServerAlignedClock | undefined
  readonly now: () => number
  readonly heartbeatKey: string
  /** This process's id among the fleet's: its heartbeat, and the units it holds in strict mode. */
  readonly instance = `${process.pid}-${randomBytes(6).toString('hex')}`
  readonly startedAt: number
  /** Live processes at the last good sync (1 before it). */
  instances = 1
  /** When Redis last answered a read or a round trip: an outage is measured from it. */
  lastContactAt = 0
  /** When the last sync that reached every node ended. */
  lastGoodSyncAt = 0
  private readonly runSync: SyncCommand

  constructor(private readonly config: HybridConfig) {
    const { connection, prefix, clock } = config
    this.keys = new KeyBuilder(prefix)
    this.heartbeatKey = hybridInstancesKey(prefix)
    this.cluster = connection.cluster
    this.runSync = connection.script(syncScript)
    this.watches = new ReplyWatches(connection)
    if (clock) {
      this.now = () => timeFrom(clock, 'HybridStore')
    } else {
      this.aligned = new ServerAlignedClock()
      this.now = this.aligned.now
    }
    this.errors = ClientErrors.of(connection)
    this.startedAt = this.now()
    this.health = new NodeHealth(connection, this.startedAt)
  }

  /** The Redis key that holds a target's state: a RedisStore's with the same prefix. */
  keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }

  /** The watch of the connection that carries `key`. */
  watchOf(key: string): ConnectionWatch {
    return this.watches.of(this.cluster ? calculateSlot(key) : 0)
  }

  /** A call's time for the scripts: the injected clock's ms (`at`, else now), or '-' for the server's `TIME`. */
  timeArg(at?: number): string {
    return this.config.clock ? String(at ?? this.safeNow()) : '-'
  }

  /** The store's time, or the last good sync's when its clock fails (the sync reports that failure). */
  safeNow(): number {
    try {
      return this.now()
    } catch {
      return this.lastGoodSyncAt
    }
  }

  /** How early a slice stops: the default clock may differ from Redis's by this much. */
  marginMs(): number {
    return this.aligned ? this.aligned.uncertaintyMs() : 0
  }

  /** Runs the sync script, its connection's watch told, and `asker` (a decision waiting on it). */
  async sent(keyCount: number, keysAndArgs: string[], asker?: StoreReceiver): Promise<unknown> {
    const first = keysAndArgs[0] as string
    const watch = this.watchOf(first)
    const reply = this.runSync(keyCount, ...keysAndArgs)
    watch.sent()
    asker?.sent?.(watch)
    const node = this.health.nodeOf(first)
    try {
      const answered = await reply
      this.errors.answered()
      this.health.answered(node, this.safeNow())
      return answered
    } catch (error) {
      if (isStoreDown(error)) this.health.failed(node, first)
      throw error
    } finally {
      watch.heard()
    }
  }

  /** A script call on `key`'s node, sent at `sentAt` (monotonic ms), answered at the server's `serverMs`. */
  answered(key: string, serverMs: number, sentAt: number): void {
    this.errors.answered()
    this.health.answered(this.health.nodeOf(key), this.safeNow())
    this.aligned?.measured(serverMs, sentAt, performance.now())
  }

  /** Asks the node serving `key` whether it holds it: an outcome of a sync that pushes nothing. */
  probe(key: string): Promise<ChunkOutcome | Error> {
    return this.config.connection.exists(key).then(
      () => ({ overAdmitted: 0, instances: undefined }),
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    )
  }

  /** Marks the nodes serving the targets as answering (`at`) or failed (undefined). */
  heardFrom(targets: readonly StoreTarget[], at: number | undefined): void {
    if (at !== undefined) this.lastContactAt = at
    // One node off a Cluster: no key to build.
    if (!this.cluster) {
      if (at === undefined) this.health.failed('', this.heartbeatKey)
      else this.health.answered('', at)
      return
    }
    for (const target of targets) {
      const key = this.keyOf(target)
      const node = this.health.nodeOf(key)
      if (at === undefined) this.health.failed(node, key)
      else this.health.answered(node, at)
    }
  }

  /**
   * Whether decisions on the targets follow the outage policy at `now`: the last exchange with a
   * node serving one failed, and none has reached it for `outage.afterMs`. Time alone is not an
   * outage: a clock that jumps forward (an injected one, or a wall clock stepped) while syncs
   * succeed leaves the store synced.
   */
  downFor(targets: readonly StoreTarget[], now: number): boolean {
    const { health } = this
    if (!health.failing) return false
    const { outageAfterMs } = this.config
    if (!this.cluster) return health.isDown('', now, outageAfterMs)
    for (const target of targets) if (health.isDown(health.nodeOf(this.keyOf(target)), now, outageAfterMs)) return true
    return false
  }

  /** Whether the last exchange with a node that serves one of the targets failed. */
  failingFor(targets: readonly StoreTarget[]): boolean {
    const { health } = this
    if (!health.failing) return false
    if (!this.cluster) return health.isFailing('')
    for (const target of targets) if (health.isFailing(health.nodeOf(this.keyOf(target)))) return true
    return false
  }

  /** When Redis last answered, or when the store started. */
  lastSyncOrStart(): number {
    const contact = Math.max(this.lastGoodSyncAt, this.lastContactAt)
    return contact > 0 ? contact : this.startedAt
  }

  /** A store failure (`TG_STORE`), with what the client last said. */
  failure(message: string, cause?: unknown): TollgateError {
    const recent = this.errors.recent
    const said = recent ? `; the store last said: ${recent.message}` : ''
    return new TollgateError('TG_STORE', `${message}${said}`, { storeDown: true, cause: cause ?? recent })
  }

  /** A failed exchange as the store reports it: `TG_STORE`, its node marked failed when Redis was not reached. */
  failed(targets: readonly StoreTarget[], what: string, error: unknown): TollgateError {
    if (isStoreDown(error)) this.heardFrom(targets, undefined)
    if (error instanceof TollgateError && error.code === 'TG_STORE') return error
    return this.failure(`${what} failed: ${error instanceof Error ? error.message : String(error)}`, error)
  }
}
