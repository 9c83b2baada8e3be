import { type Clock, systemClock, timeFrom } from '../clock.js'
import { describeValue, TollgateConfigError } from '../errors.js'
import { KeyBuilder } from '../keys.js'
import { checkOptionsObject, optionKeys } from '../option-objects.js'
import { evaluateLocally, type StateTable } from './evaluate-locally.js'
import { EvictionRing, type RingEntry } from './eviction-ring.js'
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
   * The most (rule, identifier) states kept. Past it a state not used recently is dropped, which
   * hands that identifier a fresh quota, so size it above the number of identifiers active within
   * your longest period. Every decision that finds a state uses it: one that charges, one that
   * refuses, a peek or a refund, so an identifier kept refused is among the last to go. The order
   * is CLOCK, an approximation of least recently used: a hand goes round the states and drops the
   * first one not used since it last came by. Measured: about 450–500 bytes of heap per key for a
   * fixed window and 660–710 for a sliding log, so the default holds up to ~640 MB.
   * @default 1_000_000
   * @example new MemoryStore({ maxKeys: 100_000 })
   */
  maxKeys?: number
  /**
   * How often expired state is swept away. The sweep looks at 10,000 states at a time and lets
   * the event loop run between those slices, so that a million expired states do not hold it up
   * in one go. `0` disables the timer (call `sweep()` yourself; it sweeps everything at once).
   * @default 60_000
   * @example new MemoryStore({ sweepIntervalMs: 10_000 })
   */
  sweepIntervalMs?: number
}

class Entry implements RingEntry<Entry> {
  // Declared, not defined: the constructor alone gives V8 the fields' order and kinds, so that
  // `expiresAt` is a number field from the start; defined first as undefined, it would hold a
  // boxed number, and every charge would allocate a new one.
  declare state: unknown
  declare expiresAt: number
  declare used: boolean
  declare prev: Entry
  declare next: Entry
  declare readonly key: string

  constructor(key: string, state: unknown, expiresAt: number) {
    this.state = state
    this.expiresAt = expiresAt
    this.used = false
    this.prev = this
    this.next = this
    this.key = key
  }
}

const OPTION_KEYS = optionKeys<MemoryStoreOptions>({ clock: true, maxKeys: true, sweepIntervalMs: true })

/** The most states the timer's sweep looks at before it lets the event loop run again. */
export const SWEEP_SLICE = 10_000

/** The embedded, in-process store: the default when no store is given. One process only. */
export class MemoryStore implements Store {
  private readonly entries = new Map<string, Entry>()
  private readonly ring = new EvictionRing<Entry>()
  private readonly keys = new KeyBuilder('')
  private readonly clock: Clock
  private readonly maxKeys: number
  private readonly timer: NodeJS.Timeout | undefined
  /** The timer's sweep, while it has slices left to do. */
  private sweeping: NodeJS.Immediate | undefined
  private evicted = 0

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
        this.drop(entry)
        return undefined
      }
      // Every decision that finds a state uses it, refused ones and peeks included: an
      // identifier kept refused must be the last to be forgotten, or flooding the store with
      // other identifiers would hand it a fresh quota.
      entry.used = true
      this.lastKey = key
      this.lastEntry = entry
      return entry.state
    },
    set: (key, state, expiresAt) => {
      const entry = key === this.lastKey ? this.lastEntry : this.entries.get(key)
      if (entry) {
        entry.state = state
        entry.expiresAt = expiresAt
        entry.used = true
        return
      }
      const added = new Entry(key, state, expiresAt)
      this.entries.set(key, added)
      if (this.ring.size < this.maxKeys) {
        this.ring.add(added)
        return
      }
      this.forget()
      this.entries.delete(this.ring.replaceUnused(added).key)
      this.evicted++
    },
    delete: (key) => {
      const entry = key === this.lastKey ? this.lastEntry : this.entries.get(key)
      if (entry) this.drop(entry)
    },
  }

  constructor(options: MemoryStoreOptions = {}) {
    const {
      clock = systemClock,
      maxKeys = 1_000_000,
      sweepIntervalMs = 60_000,
    } = checkOptionsObject(options, OPTION_KEYS, 'MemoryStore options')
    if (typeof clock !== 'function') {
      throw new TollgateConfigError(`MemoryStore option clock must be a function, got ${describeValue(clock)}`)
    }
    if (typeof maxKeys !== 'number' || !Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new TollgateConfigError(
        `MemoryStore option maxKeys must be a positive integer, got ${describeValue(maxKeys)}`,
      )
    }
    // setInterval holds at most a signed 32-bit delay; past it Node silently uses 1 ms.
    if (
      typeof sweepIntervalMs !== 'number' ||
      !Number.isSafeInteger(sweepIntervalMs) ||
      sweepIntervalMs < 0 ||
      sweepIntervalMs > 2 ** 31 - 1
    ) {
      throw new TollgateConfigError(
        `MemoryStore option sweepIntervalMs must be an integer from 0 to 2147483647, got ${describeValue(sweepIntervalMs)}`,
      )
    }
    this.clock = clock as Clock
    this.maxKeys = maxKeys
    if (sweepIntervalMs > 0) {
      this.timer = setInterval(() => this.startSweeping(), sweepIntervalMs)
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
    for (const target of targets) this.table.delete(this.keyOf(target))
    return Promise.resolve()
  }

  /**
   * Drops every expired state now, in one go. The timer's sweep does the same in slices of
   * 10,000 states, letting the event loop run between them.
   */
  sweep(): void {
    this.stopSweeping()
    this.ring.startSweep()
    this.sweepSome(Number.POSITIVE_INFINITY)
  }

  /** Each held key with the milliseconds it has left: what a Redis `PTTL` would say. */
  ttls(): Array<{ key: string; ttlMs: number }> {
    const now = this.clock()
    return [...this.entries].map(([key, entry]) => ({ key, ttlMs: entry.expiresAt - now }))
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.stopSweeping()
    this.forget()
    this.entries.clear()
    this.ring.clear()
    return Promise.resolve()
  }

  private startSweeping(): void {
    // A sweep still under way when the next is due just carries on.
    if (this.sweeping) return
    this.ring.startSweep()
    this.sweepSlice()
  }

  private readonly sweepSlice = (): void => {
    this.sweeping = undefined
    if (this.sweepSome(SWEEP_SLICE)) return
    this.sweeping = setImmediate(this.sweepSlice)
    this.sweeping.unref()
  }

  private stopSweeping(): void {
    if (this.sweeping) clearImmediate(this.sweeping)
    this.sweeping = undefined
  }

  /** True once the sweep is over. */
  private sweepSome(budget: number): boolean {
    const now = this.clock()
    return this.ring.sweep(budget, (entry) => {
      if (entry.expiresAt <= now) this.drop(entry)
    })
  }

  private drop(entry: Entry): void {
    this.forget()
    this.entries.delete(entry.key)
    this.ring.remove(entry)
  }

  private forget(): void {
    this.lastKey = undefined
    this.lastEntry = undefined
  }

  private keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }
}
