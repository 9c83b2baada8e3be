import type { Decision } from '../../rules/decision.js'
import { encodeKeyPart, KeyBuilder, MAX_RAW_PART_LENGTH } from '../../rules/keys.js'
import type { AlgorithmName } from '../../rules/rules.js'
import { type Clock, clockOption, systemClock, timeFrom } from '../../support/clock.js'
import { describeValue, TollgateConfigError } from '../../support/errors.js'
import { checkOptionsObject, optionKeys } from '../../support/option-objects.js'
import { MAX_TIMER_MS } from '../../support/timer-delay.js'
import type { TargetSlot } from '../shared/decision-targets.js'
import { decideLocally, evaluateLocally, type StateTable } from '../shared/evaluate-locally.js'
import { DECIDES_IN_PROCESS, type LocalCall, localDecisionOf } from '../shared/local-decision.js'
import type { Store, StoreRequest, StoreResult, StoreTarget, StoreWindowResult } from '../store.js'
import { EvictionRing, type RingEntry } from './eviction-ring.js'
import { MemoryLockouts } from './lockouts.js'

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
   * first one not used since it last came by. The heap a key takes, by algorithm, is measured by
   * `pnpm --filter @tollgate/bench memory-bound` (bench/README.md): size the bound by it.
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

/** The states of one rule and algorithm. */
class RuleStates {
  /** By identifier, for identifiers of at most MAX_RAW_PART_LENGTH characters. */
  readonly entries = new Map<string, Entry>()
  /**
   * By the digest that stands for a longer identifier in its key, as in Redis: a state then holds
   * no more than a short identifier's, whatever the length of its own (up to 16,384 characters).
   */
  readonly digests = new Map<string, Entry>()

  constructor(
    readonly rule: string,
    readonly algorithm: AlgorithmName,
    /** The states of a rule of the same name and another algorithm: limiters sharing the store may hold both. */
    readonly other: RuleStates | undefined,
  ) {}

  /** The identifier's entry: the one stored, or a new one not stored yet. */
  entryOf(identifier: string): Entry {
    if (identifier.length <= MAX_RAW_PART_LENGTH) {
      return this.entries.get(identifier) ?? new Entry(this.entries, identifier)
    }
    const part = encodeKeyPart(identifier)
    return this.digests.get(part) ?? new Entry(this.digests, part)
  }
}

/**
 * One state, and the StateTable key a decision reads and writes it by: found once per target,
 * it spares the decision building its Redis-layout key string and hashing it again (bench/README.md).
 * A target with no state gets an entry that is not `stored`; writing a state to it adds it.
 */
class Entry implements RingEntry<Entry> {
  // Declared, not defined: the constructor alone gives V8 the fields' order and kinds, so that
  // `expiresAt` is a number field from the start; defined first as undefined, it would hold a
  // boxed number, and every charge would allocate a new one.
  declare state: unknown
  declare expiresAt: number
  declare used: boolean
  declare stored: boolean
  declare prev: Entry
  declare next: Entry
  /** The Map that holds the entry while it is stored, and its key there. */
  declare readonly map: Map<string, Entry>
  declare readonly name: string

  constructor(map: Map<string, Entry>, name: string) {
    this.state = undefined
    this.expiresAt = 0
    this.used = false
    this.stored = false
    this.prev = this
    this.next = this
    this.map = map
    this.name = name
  }
}

const OPTION_KEYS = optionKeys<MemoryStoreOptions>({ clock: true, maxKeys: true, sweepIntervalMs: true })

/** The most states the timer's sweep looks at before it lets the event loop run again. */
export const SWEEP_SLICE = 10_000

/** The embedded, in-process store: the default when no store is given. One process only. */
export class MemoryStore implements Store {
  /** By rule name. */
  private readonly statesByRule = new Map<string, RuleStates>()
  private readonly ring = new EvictionRing<Entry>()
  readonly holdsBlocks = true
  readonly chargesOverLimits = true
  private readonly lockouts: MemoryLockouts
  private readonly clock: Clock
  private readonly maxKeys: number
  private readonly timer: NodeJS.Timeout | undefined
  /** The timer's sweep, while it has slices left to do. */
  private sweeping: NodeJS.Immediate | undefined
  private evicted = 0
  /**
   * Each decision's entries, in target order, reused by every decision (it runs to its end before
   * another begins) rather than allocated for each; evaluateLocally reads as many as it has targets.
   */
  private entries: Entry[] = []
  /** Each decision's answers, one per window, reused as `entries` is: the decision copies them out. */
  private readonly answers: StoreWindowResult[] = []
  /** The states the last target was found in (statesOf). */
  private lastStates: RuleStates | undefined

  private readonly table: StateTable<Entry> = {
    get: (entry, now) => {
      // An expired state reads as none but stays stored until it is written again, swept or
      // evicted: dropping it here and adding it back when the decision writes would cost two
      // hash table updates, and a bucket that is nearly full is full again, expired, within
      // milliseconds (bench/README.md).
      if (!entry.stored || entry.expiresAt <= now) return undefined
      // Every decision that finds a state uses it, refused ones and peeks included: an
      // identifier kept refused must be the last to be forgotten, or flooding the store with
      // other identifiers would hand it a fresh quota.
      entry.used = true
      return entry.state
    },
    set: (entry, state, expiresAt) => {
      const kept = entry.state
      // A state made anew where an expired one of the same size is kept (a bucket full again
      // reads as none) is copied into the kept one: the new array then dies young, where keeping
      // it would have the next scavenge copy it out of the young generation (bench/README.md).
      if (state !== kept && Array.isArray(state) && Array.isArray(kept) && state.length === kept.length) {
        for (let i = 0; i < state.length; i++) kept[i] = state[i]
      } else entry.state = state
      entry.expiresAt = expiresAt
      if (entry.stored) {
        entry.used = true
        return
      }
      // Another target's write may have evicted this entry since the decision found it.
      entry.used = false
      entry.stored = true
      entry.map.set(entry.name, entry)
      if (this.ring.size < this.maxKeys) {
        this.ring.add(entry)
        return
      }
      const victim = this.ring.replaceUnused(entry)
      victim.stored = false
      victim.map.delete(victim.name)
      this.evicted++
    },
    delete: (entry) => {
      if (entry.stored) this.drop(entry)
    },
  }

  constructor(options: MemoryStoreOptions = {}) {
    const {
      clock = systemClock,
      maxKeys = 1_000_000,
      sweepIntervalMs = 60_000,
    } = checkOptionsObject(options, OPTION_KEYS, 'MemoryStore options')
    clockOption(clock, 'MemoryStore')
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
      sweepIntervalMs > MAX_TIMER_MS
    ) {
      throw new TollgateConfigError(
        `MemoryStore option sweepIntervalMs must be an integer from 0 to ${MAX_TIMER_MS}, got ${describeValue(sweepIntervalMs)}`,
      )
    }
    this.clock = clock as Clock
    this.maxKeys = maxKeys
    this.lockouts = new MemoryLockouts(maxKeys)
    if (sweepIntervalMs > 0) {
      this.timer = setInterval(() => this.startSweeping(), sweepIntervalMs)
      this.timer.unref()
    }
  }

  /** States currently stored, expired or not. */
  get size(): number {
    return this.ring.size
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
    const now = timeFrom(this.clock, 'MemoryStore')
    return evaluateLocally(
      this.table,
      this.entriesOf(request.targets, request.targets.length),
      request,
      now,
      this.lockouts,
    )
  }

  /** @internal The limiter's one-pass decision (stores/shared/local-decision.ts); not part of the public API. */
  [DECIDES_IN_PROCESS](call: LocalCall, targets: readonly TargetSlot[], count: number): Decision {
    const now = timeFrom(this.clock, 'MemoryStore')
    const entries = this.entriesOf(targets, count)
    const { answers } = this
    const bits = decideLocally(this.table, entries, call, targets, count, now, answers, this.lockouts)
    return localDecisionOf(call, targets, count, bits, now, answers)
  }

  /** The entries of the first `count` targets, found by rule, then identifier. */
  private entriesOf(targets: readonly StoreTarget[], count: number): Entry[] {
    let { entries } = this
    if (entries.length < count) {
      entries = new Array(count)
      this.entries = entries
    }
    for (let t = 0; t < count; t++) {
      const { rule, algorithm, identifier } = targets[t] as StoreTarget
      entries[t] = this.statesOf(rule, algorithm).entryOf(identifier)
    }
    return entries
  }

  reset(targets: readonly StoreTarget[]): Promise<void> {
    for (const { rule, algorithm, identifier } of targets) {
      const entry = this.statesOf(rule, algorithm).entryOf(identifier)
      if (entry.stored) this.drop(entry)
    }
    this.lockouts.delete(targets)
    return Promise.resolve()
  }

  /**
   * Drops every expired state now, in one go. The timer's sweep does the same in slices of
   * 10,000 states, letting the event loop run between them.
   */
  sweep(): void {
    this.stopSweeping()
    this.ring.startSweep()
    this.lockouts.sweep(this.clock())
    this.sweepSome(Number.POSITIVE_INFINITY)
  }

  /** Each unexpired key, named as RedisStore names it without a prefix, with the milliseconds it has left: what a Redis `PTTL` would say. */
  ttls(): Array<{ key: string; ttlMs: number }> {
    const now = this.clock()
    const keys = new KeyBuilder('')
    const ttls: Array<{ key: string; ttlMs: number }> = []
    for (const first of this.statesByRule.values()) {
      for (let states: RuleStates | undefined = first; states !== undefined; states = states.other) {
        for (const [identifier, entry] of states.entries) {
          if (entry.expiresAt > now)
            ttls.push({ key: keys.key(states.rule, states.algorithm, identifier), ttlMs: entry.expiresAt - now })
        }
        for (const [part, entry] of states.digests) {
          if (entry.expiresAt > now)
            ttls.push({ key: keys.keyOfPart(states.rule, states.algorithm, part), ttlMs: entry.expiresAt - now })
        }
      }
    }
    return [...ttls, ...this.lockouts.ttls(now)]
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.stopSweeping()
    this.statesByRule.clear()
    this.lastStates = undefined
    this.ring.clear()
    this.lockouts.clear()
    this.entries = []
    return Promise.resolve()
  }

  private statesOf(rule: string, algorithm: AlgorithmName): RuleStates {
    // Decisions of one rule follow one another: its name is the same string each time, so the
    // last states is found by two comparisons of references rather than a lookup by hash.
    const last = this.lastStates
    if (last !== undefined && last.rule === rule && last.algorithm === algorithm) return last
    const found = this.findStates(rule, algorithm)
    this.lastStates = found
    return found
  }

  private findStates(rule: string, algorithm: AlgorithmName): RuleStates {
    const first = this.statesByRule.get(rule)
    for (let states = first; states !== undefined; states = states.other) {
      if (states.algorithm === algorithm) return states
    }
    const states = new RuleStates(rule, algorithm, first)
    this.statesByRule.set(rule, states)
    return states
  }

  private startSweeping(): void {
    // A sweep still under way when the next is due just carries on.
    if (this.sweeping) return
    this.ring.startSweep()
    this.lockouts.sweep(this.clock())
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
    entry.stored = false
    entry.map.delete(entry.name)
    this.ring.remove(entry)
  }
}
