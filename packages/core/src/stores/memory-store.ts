import { type Clock, systemClock, timeFrom } from '../clock.js'
import { describeValue, TollgateConfigError } from '../errors.js'
import { KeyBuilder } from '../keys.js'
import { isPlainObject, rejectUnknownKeys } from '../rules.js'
import { evaluateLocally, type StateTable } from './evaluate-locally.js'
import type { Store, StoreRequest, StoreResult, StoreTarget } from './store.js'

export interface MemoryStoreOptions {
  /**
   * Where time comes from; tests pass a manual clock. It must return whole milliseconds since
   * the epoch (0 to 8.64e15): a decision whose clock returns anything else (NaN, a string, a
   * fraction, a negative number) fails as a store error, code `TG_STORE`, its message naming the
   * value, and touches no state.
   * @default Date.now
   * @example () => Date.now()
   */
  clock?: Clock
  /**
   * The most (rule, identifier) states kept. Past it a state not charged recently is dropped
   * (CLOCK order: an oldest state charged since eviction last passed it is kept and moved on),
   * which hands that identifier a fresh quota, so size it above the number of
   * identifiers active within your longest period. Measured: about 420–470 bytes of heap per key
   * for a fixed window and 630–680 for a sliding log, so the default holds up to ~600 MB.
   * @default 1_000_000
   */
  maxKeys?: number
  /**
   * How often expired state is swept away. `0` disables the timer (call `sweep()` yourself).
   * @default 60_000
   */
  sweepIntervalMs?: number
}

interface Entry {
  state: unknown
  expiresAt: number
  /** Charged since eviction last passed it: it gets a second chance (the CLOCK policy). */
  charged: boolean
}

const OPTION_KEYS = new Set(['clock', 'maxKeys', 'sweepIntervalMs'])

/** The embedded, in-process store: the default when no store is given. One process only. */
export class MemoryStore implements Store {
  private readonly entries = new Map<string, Entry>()
  private readonly keys = new KeyBuilder('')
  private readonly clock: Clock
  private readonly maxKeys: number
  private readonly timer: NodeJS.Timeout | undefined
  private evicted = 0
  /**
   * One iterator kept across evictions: a fresh `keys().next()` steps over every deleted entry
   * still at the front of the Map, so a store kept full by a stream of new identifiers would
   * slow to a crawl. A live iterator skips what was deleted and sees what was added.
   */
  private evictionCursor: Iterator<string> | undefined

  /**
   * The entry the last `get` found: a decision reads a key and then writes it, and looking a
   * fresh key string up hashes all of it again. Forgotten whenever an entry leaves the Map.
   */
  private lastKey: string | undefined
  private lastEntry: Entry | undefined

  private readonly table: StateTable = {
    get: (key, now) => {
      const entry = this.entries.get(key)
      this.lastKey = undefined
      if (!entry) return undefined
      if (entry.expiresAt <= now) {
        this.entries.delete(key)
        return undefined
      }
      this.lastKey = key
      this.lastEntry = entry
      return entry.state
    },
    set: (key, state, expiresAt) => {
      // Marked rather than moved to the end: a delete and a set on every charge cost more than
      // the decision, while eviction, which moves marked entries on, only runs once full.
      const entry = key === this.lastKey ? this.lastEntry : this.entries.get(key)
      if (entry) {
        entry.state = state
        entry.expiresAt = expiresAt
        entry.charged = true
        return
      }
      this.entries.set(key, { state, expiresAt, charged: false })
      if (this.entries.size > this.maxKeys) this.evictOldest(key)
    },
    delete: (key) => {
      this.forget()
      this.entries.delete(key)
    },
  }

  constructor(options: MemoryStoreOptions = {}) {
    const raw: unknown = options
    if (!isPlainObject(raw)) {
      throw new TollgateConfigError(`MemoryStore options must be an object, got ${describeValue(raw)}`)
    }
    rejectUnknownKeys(raw, OPTION_KEYS, 'MemoryStore')
    const { clock = systemClock, maxKeys = 1_000_000, sweepIntervalMs = 60_000 } = options
    if (typeof clock !== 'function') {
      throw new TollgateConfigError(`MemoryStore option clock must be a function, got ${describeValue(clock)}`)
    }
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new TollgateConfigError(
        `MemoryStore option maxKeys must be a positive integer, got ${describeValue(maxKeys)}`,
      )
    }
    // setInterval holds at most a signed 32-bit delay; past it Node silently uses 1 ms.
    if (!Number.isSafeInteger(sweepIntervalMs) || sweepIntervalMs < 0 || sweepIntervalMs > 2 ** 31 - 1) {
      throw new TollgateConfigError(
        `MemoryStore option sweepIntervalMs must be an integer from 0 to 2147483647, got ${describeValue(sweepIntervalMs)}`,
      )
    }
    this.clock = clock
    this.maxKeys = maxKeys
    if (sweepIntervalMs > 0) {
      this.timer = setInterval(() => this.sweep(), sweepIntervalMs)
      this.timer.unref()
    }
  }

  /** States currently held, expired or not. */
  get size(): number {
    return this.entries.size
  }

  /** States dropped because `maxKeys` was reached. */
  get evictions(): number {
    return this.evicted
  }

  evaluate(request: StoreRequest): Promise<StoreResult> {
    try {
      return Promise.resolve(this.evaluateSync(request))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  evaluateSync(request: StoreRequest): StoreResult {
    const keys = request.targets.map((target) => this.keyOf(target))
    return evaluateLocally(this.table, keys, request, timeFrom(this.clock, 'MemoryStore'))
  }

  reset(targets: readonly StoreTarget[]): Promise<void> {
    this.forget()
    for (const target of targets) this.entries.delete(this.keyOf(target))
    return Promise.resolve()
  }

  /** Drops every expired state now. */
  sweep(): void {
    this.forget()
    const now = this.clock()
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= now) this.entries.delete(key)
    }
  }

  /** Each held key with the milliseconds it has left: what a Redis `PTTL` would say. */
  ttls(): Array<{ key: string; ttlMs: number }> {
    const now = this.clock()
    return [...this.entries].map(([key, entry]) => ({ key, ttlMs: entry.expiresAt - now }))
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.forget()
    this.entries.clear()
    return Promise.resolve()
  }

  /**
   * Drops the oldest state not charged since eviction last passed it; charged ones move to the
   * end, unmarked. That approximates least-recently-charged order (CLOCK) and never drops
   * `added`, the state just made.
   */
  private evictOldest(added: string): void {
    this.forget()
    for (let passes = this.entries.size * 2; passes > 0; passes--) {
      let next = this.evictionCursor?.next()
      if (!next || next.done) {
        this.evictionCursor = this.entries.keys()
        next = this.evictionCursor.next()
      }
      if (next.done) return
      const key = next.value
      const entry = this.entries.get(key) as Entry
      if (key === added || entry.charged) {
        entry.charged = false
        this.entries.delete(key)
        this.entries.set(key, entry)
        continue
      }
      this.entries.delete(key)
      this.evicted++
      return
    }
  }

  private forget(): void {
    this.lastKey = undefined
    this.lastEntry = undefined
  }

  private keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }
}
