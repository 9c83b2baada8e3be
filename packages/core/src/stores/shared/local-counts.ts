import type { Window } from '../../rules/rules.js'
import { OldestFirst } from '../../support/oldest-first.js'
import type { StoreRequest, StoreResult, StoreTarget } from '../store.js'
import { evaluateLocally, type StateTable } from './evaluate-locally.js'

/** Counts looked at for an expired one before the oldest is evicted instead. */
const EVICTION_LOOK = 16

/**
 * The one table a store failure's `'local'` policies decide on, whichever store failed: the
 * limiter's `onStoreError: 'local'` while its store fails, a HybridStore's outage policy while no
 * sync reaches Redis. Each process counts only what it admits itself from the failure on,
 * against its share of each limit (⌈limit ÷ processes⌉; the whole limit when `processes` is 1).
 * It holds at most `maxKeys` counts: a new key past that takes the place of an expired count,
 * else of the one written longest ago, so that a failure met by a flood of identifiers keeps the
 * process's memory bounded; the evicted key counts from zero again, within its share.
 */
export class LocalCounts {
  private readonly states = new OldestFirst<string, { state: unknown; expiresAt: number }>()
  private readonly shares = new WeakMap<readonly Window[], readonly Window[]>()
  /** The time of the decision being made: a count that ended by then may give its place to a new one. */
  private now = 0
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
      if (this.states.size >= this.maxKeys && !this.states.has(key)) this.evictOne(this.now)
      this.states.set(key, { state, expiresAt })
    },
    delete: (key) => {
      this.states.delete(key)
    },
  }

  constructor(
    /** The processes a limit is shared among: 1 for the whole limit each. */
    private readonly processes: number,
    private readonly maxKeys: number,
  ) {}

  get size(): number {
    return this.states.size
  }

  evaluate(keys: readonly string[], request: StoreRequest, now: number): StoreResult {
    const targets = request.targets.map((target) => ({ ...target, windows: this.share(target.windows) }))
    this.now = now
    return evaluateLocally(this.table, keys, { ...request, targets }, now)
  }

  /** The decision over the request's targets, each counted by the key `keyOf` names it with. */
  evaluateTargets(request: StoreRequest, keyOf: (target: StoreTarget) => string, now: number): StoreResult {
    return this.evaluate(request.targets.map(keyOf), request, now)
  }

  /** An expired count among the oldest few, else the oldest: a bounded look, not a sweep. */
  private evictOne(now: number): void {
    let looked = 0
    for (const [key, kept] of this.states) {
      if (kept.expiresAt <= now) {
        this.states.delete(key)
        return
      }
      if (++looked >= EVICTION_LOOK) break
    }
    this.states.deleteOldest()
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
