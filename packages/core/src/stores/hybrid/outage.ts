import type { Window } from '../../rules/rules.js'
import { evaluateLocally, type StateTable } from '../shared/evaluate-locally.js'
import type { StoreRequest, StoreResult, StoreTarget } from '../store.js'
import type { HybridConfig } from './options.js'
import type { RedisLink } from './redis-link.js'

/**
 * A HybridStore's decisions while no sync reaches a key's Redis node for `outage.afterMs`: the
 * outage policy's answer, warned once when the outage starts (`TG_HYBRID_DEGRADED`) and once when
 * syncs reach Redis again (`TG_HYBRID_RECOVERED`).
 */
export class Outage {
  private table: OutageTable | undefined
  private noticed = false

  constructor(
    private readonly link: RedisLink,
    private readonly config: HybridConfig,
  ) {}

  /** Counts the policy keeps while it decides (`'local-*'`). */
  get size(): number {
    return this.table?.size ?? 0
  }

  /** Whether decisions on these targets follow the policy at `now`. */
  applies(targets: readonly StoreTarget[], now: number): boolean {
    if (!this.link.downFor(targets, now)) return false
    if (!this.noticed) {
      this.noticed = true
      const { outagePolicy, outageAfterMs } = this.config
      this.config.warn(
        `HybridStore: no sync has reached Redis for ${now - this.link.lastSyncOrStart()} ms (outage.afterMs ${outageAfterMs}); decisions follow the outage policy '${outagePolicy}' until one does`,
        'TG_HYBRID_DEGRADED',
      )
    }
    return true
  }

  /** The policy's answer for a decision made without Redis, on the targets' keys. */
  answer(keys: readonly string[], request: StoreRequest, now: number): StoreResult {
    const { outagePolicy } = this.config
    const error = this.link.failure(`no sync has reached Redis for ${now - this.link.lastSyncOrStart()} ms`)
    if (outagePolicy === 'allow' || outagePolicy === 'deny') {
      return { allowed: outagePolicy === 'allow', nowMs: now, windows: [], outage: { policy: outagePolicy, error } }
    }
    this.table ??= new OutageTable(outagePolicy === 'local-share' ? this.link.instances : 1, this.config.maxTrackedKeys)
    const result = this.table.evaluate(keys, request, now)
    result.outage = { policy: 'local', error }
    return result
  }

  /** A sync reached every node: decisions follow the fleet's totals again, the policy's counts dropped. */
  recovered(): void {
    if (!this.noticed || this.link.health.failing) return
    this.noticed = false
    this.table = undefined
    this.config.warn("HybridStore: syncs reach Redis again; decisions follow the fleet's totals", 'TG_HYBRID_RECOVERED')
  }
}

/**
 * What a HybridStore decides on while no sync reaches Redis and its outage policy is local: each
 * process counts only what it admits itself from the outage on, against its share of each limit
 * (⌈limit ÷ processes⌉; the whole limit when `processes` is 1, as `'local-full'` asks). It holds
 * at most `maxKeys` counts, as the store's other tables do: a new key past that takes the place
 * of an expired count, else of the oldest, so that an outage met by a flood of identifiers keeps
 * the process's memory bounded; the evicted key counts from zero again, within its share.
 */
/** Counts looked at for an expired one before the oldest is evicted instead. */
const EVICTION_LOOK = 16

export class OutageTable {
  private readonly states = new Map<string, { state: unknown; expiresAt: number }>()
  private readonly shares = new WeakMap<readonly Window[], readonly Window[]>()
  private readonly table: StateTable = {
    get: (key, now) => {
      const kept = this.states.get(key)
      if (kept === undefined) return undefined
      if (kept.expiresAt <= now) {
        this.states.delete(key)
        return undefined
      }
      return kept.state
    },
    set: (key, state, expiresAt) => {
      if (this.states.size >= this.maxKeys && !this.states.has(key)) this.evictOne(expiresAt)
      this.states.set(key, { state, expiresAt })
    },
    delete: (key) => {
      this.states.delete(key)
    },
  }

  constructor(
    private readonly processes: number,
    private readonly maxKeys: number,
  ) {}

  get size(): number {
    return this.states.size
  }

  evaluate(keys: readonly string[], request: StoreRequest, now: number): StoreResult {
    const targets = request.targets.map((target) => ({ ...target, windows: this.share(target.windows) }))
    return evaluateLocally(this.table, keys, { ...request, targets }, now)
  }

  /** An expired count among the oldest few, else the oldest: a bounded look, not a sweep. */
  private evictOne(now: number): void {
    let looked = 0
    let oldest: string | undefined
    for (const [key, kept] of this.states) {
      oldest ??= key
      if (kept.expiresAt <= now) {
        this.states.delete(key)
        return
      }
      if (++looked >= EVICTION_LOOK) break
    }
    if (oldest !== undefined) this.states.delete(oldest)
  }

  private share(windows: readonly Window[]): readonly Window[] {
    let shared = this.shares.get(windows)
    if (shared === undefined) {
      shared = windows.map((window) => {
        const limit = Math.ceil(window.limit / this.processes)
        if (window.lowBurst === undefined) return { ...window, limit }
        // Shedding starts at the same share of the smaller limit.
        return { ...window, limit, lowBurst: Math.floor((window.lowBurst * limit) / window.limit) }
      })
      this.shares.set(windows, shared)
    }
    return shared
  }
}
