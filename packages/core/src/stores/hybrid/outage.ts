import type { Window } from '../../rules/rules.js'
import { evaluateLocally, type StateTable } from '../shared/evaluate-locally.js'
import type { StoreRequest, StoreResult } from '../store.js'

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
      const held = this.states.get(key)
      if (held === undefined) return undefined
      if (held.expiresAt <= now) {
        this.states.delete(key)
        return undefined
      }
      return held.state
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
    for (const [key, held] of this.states) {
      oldest ??= key
      if (held.expiresAt <= now) {
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
