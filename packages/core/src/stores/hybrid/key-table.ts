import type { Algorithm } from '../../algorithms/algorithm.js'
import { algorithms } from '../../algorithms/index.js'
import type { KeyBuilder } from '../../rules/keys.js'
import type { Window } from '../../rules/rules.js'
import type { StateTable } from '../shared/evaluate-locally.js'
import type { CounterAlgorithm } from '../shared/redis-state.js'
import { asSegment, fold, foldAfter, foldedOf, isFolded } from './bucket-fold.js'

/** What every key of one rule shares: its name, algorithm and windows. */
export interface Shape {
  readonly id: number
  readonly rule: string
  readonly algorithm: CounterAlgorithm
  readonly windows: readonly Window[]
  readonly model: Algorithm<unknown>
  readonly bucket: boolean
  /** Values of a one-window state, `[period, …fields]`: at most INLINE, kept in `values`. */
  readonly inline: number
}

const USED = 1
const TOUCHED = 2
const LISTED = 4
/**
 * The key has an array in `wide`: its state when HELD. A state that is dropped keeps its array
 * for the next one to be written into (a bucket that refills within a millisecond is dropped and
 * written again by nearly every decision).
 */
const WIDE = 8
const HELD = 16
/** One segment of units not yet pushed, in `segmentAt` and `segmentUnits`. */
const ONE_SEGMENT = 32
/** A push of the key's units is under way: one segment in `sendingAt` and `sendingUnits` (SENDING_ONE), else in `sendingMany`. */
const SENDING = 64
const SENDING_ONE = 128
const INLINE = 4
/** Slots the eviction hand looks at for a key with nothing to push. */
const VICTIM_LOOK = 1024
/** Shape ids are kept in 16 bits. */
const MAX_SHAPES = 0xffff

/**
 * The keys a HybridStore tracks, as columns: a slot per key, its fields in typed arrays, so that a
 * key costs a Map entry and the identifier and a few numbers beside, where a key as an object of
 * its own, with its state as an array, cost over twice as much (`pnpm --filter @tollgate/bench
 * hybrid-memory` measures it). A one-window state lives in `values`; a state of
 * several windows, rarer, in `wide` as the model's array. Units not yet pushed are in columns
 * too while a key has one segment of them, and in `segments` and `sending` for the keys that
 * have more, or a push under way.
 *
 * The order a full table forgets in is CLOCK over the slots: a hand goes round and takes the
 * first slot not used since it last came by, a key with nothing to push first: one with units
 * not yet pushed goes only once they are handed to a push of their own, never while a push of
 * its units is under way, so that no unit admitted is lost with its key.
 */
export class KeyTable {
  /** Slots by rule, then identifier: a decision finds its key without building its Redis name. */
  private readonly index = new Map<string, Map<string, number>>()
  private count = 0
  private readonly shapesByWindows = new WeakMap<readonly Window[], Map<string, Shape>>()
  private readonly shapes: Shape[] = []
  private identifiers: Array<string | undefined> = []
  private shapeIds = new Uint16Array(0)
  /** Bumped whenever a slot is freed: an answer for a slot's earlier key is not its key's. */
  private generations = new Uint32Array(0)
  private flags = new Uint8Array(0)
  private values = new Float64Array(0)
  private expiries = new Float64Array(0)
  private synced = new Float64Array(0)
  private readonly wide = new Map<number, number[]>()
  /**
   * Units admitted here since the sync under way (or the last one) took the key's, as segments
   * `at, units` (segments.ts): most keys have one per sync, kept in these columns; a key
   * with more has all of them in `segments` instead, a bucket's folded (bucket-fold.ts).
   */
  private segmentAt = new Float64Array(0)
  private segmentUnits = new Float64Array(0)
  private readonly segments = new Map<number, number[]>()
  private withPending = 0
  /**
   * The units a push under way carries, until Redis took them or failed: one segment in columns,
   * as most keys push, or the key's segments (a bucket's folded) in `sendingMany`.
   */
  private sendingAt = new Float64Array(0)
  private sendingUnits = new Float64Array(0)
  private readonly sendingMany = new Map<number, number[]>()
  private sendingKeys = 0
  /** Units per ms the other processes admitted between the key's last two syncs, and how many of them were charged since. */
  readonly others = new Map<number, { perMs: number; assumed: number }>()
  private readonly free: number[] = []
  private used = 0
  private hand = 0
  private sweepAt = 0

  readonly table: StateTable<number> = {
    get: (slot, now) => this.stateOf(slot, now),
    set: (slot, state, expiresAt) => this.setState(slot, state, expiresAt),
    delete: (slot) => this.clearState(slot),
  }

  constructor(
    private readonly maxKeys: number,
    private readonly keys: KeyBuilder,
  ) {}

  get size(): number {
    return this.count
  }

  shapeOf(rule: string, algorithm: CounterAlgorithm, windows: readonly Window[]): Shape {
    let byRule = this.shapesByWindows.get(windows)
    if (byRule === undefined) {
      byRule = new Map()
      this.shapesByWindows.set(windows, byRule)
    }
    const name = `${algorithm} ${rule}`
    let shape = byRule.get(name)
    if (shape === undefined) {
      if (this.shapes.length >= MAX_SHAPES)
        throw new RangeError(`a HybridStore holds at most ${MAX_SHAPES} rule shapes`)
      const model = algorithms[algorithm]
      const bucket = algorithm === 'token-bucket' || algorithm === 'gcra'
      const arity = algorithm === 'sliding-window' ? 3 : 2
      shape = { id: this.shapes.length, rule, algorithm, windows, model, bucket, inline: 1 + arity }
      this.shapes.push(shape)
      byRule.set(name, shape)
    }
    return shape
  }

  find(rule: string, identifier: string): number {
    return this.index.get(rule)?.get(identifier) ?? -1
  }

  /** The key's name in Redis, as a RedisStore on the same prefix names it. */
  key(slot: number): string {
    const shape = this.shape(slot)
    return this.keys.key(shape.rule, shape.algorithm, this.identifiers[slot] as string)
  }

  shape(slot: number): Shape {
    return this.shapes[this.shapeIds[slot] as number] as Shape
  }

  generation(slot: number): number {
    return this.generations[slot] as number
  }

  /** Whether the slot still holds the key it held at `generation` (it may have been freed and given to another). */
  holds(slot: number, generation: number): boolean {
    return this.identifiers[slot] !== undefined && this.generations[slot] === generation
  }

  /** Whether a new key needs another's slot. */
  get full(): boolean {
    return this.count >= this.maxKeys
  }

  /**
   * Forgets a key with nothing to push, the one the eviction hand finds unused, to make room for
   * a new one; false when none of the slots looked at could go (each holds units a sync has not
   * taken yet).
   */
  evictSynced(): boolean {
    const slot = this.victim(true)
    if (slot < 0) return false
    this.remove(slot)
    return true
  }

  /**
   * Forgets a key with no push under way, handing its units not yet pushed to `push` first; false
   * when every slot looked at had a push under way (its answer is the key's: the next sync ends it).
   */
  evictPushing(push: (slot: number, units: number[]) => void): boolean {
    const slot = this.victim(true, true)
    if (slot < 0) return false
    const units = this.takePending(slot)
    if (units !== undefined) push(slot, units)
    this.remove(slot)
    return true
  }

  /** Forgets the key the eviction hand finds unused, whatever it holds; true when it held units not yet pushed. */
  evictAny(): boolean {
    const slot = this.victim(false)
    const unsynced = this.unsynced(slot)
    this.remove(slot)
    return unsynced
  }

  /** The key's slot, new: call when the table is not `full`. */
  add(identifier: string, shape: Shape): number {
    const slot = this.free.pop() ?? this.grow()
    let byIdentifier = this.index.get(shape.rule)
    if (byIdentifier === undefined) {
      byIdentifier = new Map()
      this.index.set(shape.rule, byIdentifier)
    }
    // Held for as long as the key is tracked: flat, rather than the rope of parts it may have
    // been built from, which would keep every part alive beside it. Reading a character flattens it.
    identifier.charCodeAt(0)
    byIdentifier.set(identifier, slot)
    this.count++
    this.identifiers[slot] = identifier
    this.shapeIds[slot] = shape.id
    this.flags[slot] = 0
    this.expiries[slot] = 0
    this.synced[slot] = 0
    return slot
  }

  /** The key's rule changed its windows (or is another limiter's equal rule): its state stays, found by period. */
  reshape(slot: number, shape: Shape): void {
    const state = this.stateOf(slot, Number.NEGATIVE_INFINITY)
    // Folded for the old windows' units: pushed as one segment, at their last time.
    const pending = this.segments.get(slot)
    if (pending !== undefined && isFolded(pending)) this.segments.set(slot, asSegment(pending))
    const sending = this.sendingMany.get(slot)
    if (sending !== undefined && isFolded(sending)) this.sendingMany.set(slot, asSegment(sending))
    this.shapeIds[slot] = shape.id
    if (state !== undefined) this.setState(slot, state, this.expiries[slot] as number)
  }

  remove(slot: number): void {
    const identifier = this.identifiers[slot]
    if (identifier === undefined) return
    const byIdentifier = this.index.get(this.shape(slot).rule)
    byIdentifier?.delete(identifier)
    if (byIdentifier?.size === 0) this.index.delete(this.shape(slot).rule)
    this.count--
    this.identifiers[slot] = undefined
    this.generations[slot] = (this.generations[slot] as number) + 1
    this.clearPending(slot)
    if (((this.flags[slot] as number) & WIDE) !== 0) this.wide.delete(slot)
    this.endSending(slot)
    this.flags[slot] = 0
    this.others.delete(slot)
    this.free.push(slot)
  }

  unsynced(slot: number): boolean {
    return this.hasPending(slot) || this.isSending(slot)
  }

  /** Whether a push of the key's units is under way. */
  isSending(slot: number): boolean {
    return ((this.flags[slot] as number) & SENDING) !== 0
  }

  /** Keys with units not yet pushed or a push under way (a scan of the flags: for stats, not decisions). */
  get unsyncedCount(): number {
    if (this.sendingKeys === 0) return this.withPending
    let sendingOnly = 0
    const { flags } = this
    for (let slot = 0; slot < this.used; slot++) {
      if (((flags[slot] as number) & SENDING) !== 0 && !this.hasPending(slot)) sendingOnly++
    }
    return this.withPending + sendingOnly
  }

  /** Whether the units a push under way carries are one segment: `sendingAtOf`, `sendingUnitsOf`. */
  sendsOneSegment(slot: number): boolean {
    return ((this.flags[slot] as number) & SENDING_ONE) !== 0
  }

  sendingAtOf(slot: number): number {
    return this.sendingAt[slot] as number
  }

  sendingUnitsOf(slot: number): number {
    return this.sendingUnits[slot] as number
  }

  /** The units a push under way carries (a copy when in the columns); undefined for none. */
  sendingOf(slot: number): number[] | undefined {
    const flags = this.flags[slot] as number
    if ((flags & SENDING) === 0) return undefined
    if ((flags & SENDING_ONE) !== 0) return [this.sendingAt[slot] as number, this.sendingUnits[slot] as number]
    return this.sendingMany.get(slot)
  }

  /** Hands the key's pending units to a push; false when it had none (the key is only read). */
  startSending(slot: number): boolean {
    const flags = this.flags[slot] as number
    if ((flags & ONE_SEGMENT) !== 0) {
      this.sendingAt[slot] = this.segmentAt[slot] as number
      this.sendingUnits[slot] = this.segmentUnits[slot] as number
      this.clearPending(slot)
      this.flags[slot] = (this.flags[slot] as number) | SENDING | SENDING_ONE
      this.sendingKeys++
      return true
    }
    const segments = this.segments.get(slot)
    if (segments === undefined) return false
    this.clearPending(slot)
    this.setSending(slot, segments)
    return true
  }

  /** Sets the units a push of the key carries. */
  setSending(slot: number, units: number[]): void {
    this.endSending(slot)
    this.sendingMany.set(slot, units)
    this.flags[slot] = (this.flags[slot] as number) | SENDING
    this.sendingKeys++
  }

  /** Ends the key's push under way: Redis took its units, or they go back (`putBack`); returns them. */
  endSending(slot: number): number[] | undefined {
    const flags = this.flags[slot] as number
    if ((flags & SENDING) === 0) return undefined
    const units = this.sendingOf(slot)
    this.sendingMany.delete(slot)
    this.flags[slot] = flags & ~(SENDING | SENDING_ONE)
    this.sendingKeys--
    return units
  }

  /** Keys with units admitted here that no sync has taken yet. */
  get pendingKeys(): number {
    return this.withPending
  }

  hasPending(slot: number): boolean {
    return ((this.flags[slot] as number) & ONE_SEGMENT) !== 0 || this.segments.has(slot)
  }

  /** The key's pending segments (or a bucket's units folded), a copy when they are in the columns; undefined for none. */
  pendingOf(slot: number): number[] | undefined {
    if (((this.flags[slot] as number) & ONE_SEGMENT) !== 0) {
      return [this.segmentAt[slot] as number, this.segmentUnits[slot] as number]
    }
    return this.segments.get(slot)
  }

  /** The last pending segment's time; call only when `hasPending`, and not for a bucket. */
  lastSegmentAt(slot: number): number {
    if (((this.flags[slot] as number) & ONE_SEGMENT) !== 0) return this.segmentAt[slot] as number
    const segments = this.segments.get(slot) as number[]
    return segments[segments.length - 2] as number
  }

  lastSegmentUnits(slot: number): number {
    if (((this.flags[slot] as number) & ONE_SEGMENT) !== 0) return this.segmentUnits[slot] as number
    const segments = this.segments.get(slot) as number[]
    return segments[segments.length - 1] as number
  }

  /** Adds units to the last pending segment. */
  addToLastSegment(slot: number, units: number): void {
    if (((this.flags[slot] as number) & ONE_SEGMENT) !== 0) {
      this.segmentUnits[slot] = (this.segmentUnits[slot] as number) + units
      return
    }
    const segments = this.segments.get(slot) as number[]
    segments[segments.length - 1] = (segments[segments.length - 1] as number) + units
  }

  /**
   * Folds units admitted on a bucket into its pending ones: in the columns while they are the
   * first, then folded, so that a key holds a fixed number of values whatever its rate.
   */
  foldBucket(slot: number, windows: readonly Window[], at: number, units: number): void {
    const pending = this.pendingOf(slot)
    if (pending === undefined) {
      this.appendSegment(slot, at, units)
      return
    }
    if (isFolded(pending)) {
      fold(pending, windows, at, units)
      return
    }
    // Segments, in the columns or (given back by a failed push) in `segments`: folded from now on.
    const folded = foldedOf(windows, pending)
    fold(folded, windows, at, units)
    this.flags[slot] = (this.flags[slot] as number) & ~ONE_SEGMENT
    this.segments.set(slot, folded)
  }

  /** Starts a pending segment after the key's others, if any. */
  appendSegment(slot: number, at: number, units: number): void {
    const flags = this.flags[slot] as number
    if ((flags & ONE_SEGMENT) !== 0) {
      this.flags[slot] = flags & ~ONE_SEGMENT
      this.segments.set(slot, [this.segmentAt[slot] as number, this.segmentUnits[slot] as number, at, units])
      return
    }
    const segments = this.segments.get(slot)
    if (segments !== undefined) {
      segments.push(at, units)
      return
    }
    this.flags[slot] = flags | ONE_SEGMENT
    this.segmentAt[slot] = at
    this.segmentUnits[slot] = units
    this.withPending++
  }

  /** The key's pending segments, handed over (to a sync), and none left. */
  takePending(slot: number): number[] | undefined {
    const taken = this.pendingOf(slot)
    this.clearPending(slot)
    return taken
  }

  /** Puts segments (or a bucket's folded units) back before the key's pending ones (a push Redis did not take). */
  putBack(slot: number, segments: readonly number[]): void {
    const after = this.takePending(slot)
    const shape = this.shape(slot)
    if (shape.bucket) {
      const folded = foldedOf(shape.windows, segments)
      if (after !== undefined) foldAfter(folded, shape.windows, after)
      this.segments.set(slot, folded)
      this.withPending++
      return
    }
    const all = [...segments, ...(after ?? [])]
    for (let i = 0; i < all.length; i += 2) this.appendSegment(slot, all[i] as number, all[i + 1] as number)
  }

  private clearPending(slot: number): void {
    if (!this.hasPending(slot)) return
    this.flags[slot] = (this.flags[slot] as number) & ~ONE_SEGMENT
    this.segments.delete(slot)
    this.withPending--
  }

  markUsed(slot: number): void {
    this.flags[slot] = (this.flags[slot] as number) | USED
  }

  /** Marks the key decided on since the last sync; true when it was not listed for the next sync yet. */
  touch(slot: number): boolean {
    const flags = this.flags[slot] as number
    this.flags[slot] = flags | USED | TOUCHED | LISTED
    return (flags & LISTED) === 0
  }

  /** Lists the key for the next sync; true when it was not listed yet. */
  list(slot: number): boolean {
    const flags = this.flags[slot] as number
    this.flags[slot] = flags | LISTED
    return (flags & LISTED) === 0
  }

  unlist(slot: number): void {
    this.flags[slot] = (this.flags[slot] as number) & ~(LISTED | TOUCHED)
  }

  listed(slot: number): boolean {
    return ((this.flags[slot] as number) & LISTED) !== 0
  }

  /** The state the models decide on, or undefined; one that expired is dropped first. */
  stateOf(slot: number, now: number): unknown {
    const flags = this.flags[slot] as number
    if ((flags & HELD) === 0) return undefined
    if ((this.expiries[slot] as number) <= now) {
      this.clearState(slot)
      return undefined
    }
    if ((flags & WIDE) !== 0) return this.wide.get(slot)
    const at = slot * INLINE
    const { values } = this
    return this.shape(slot).inline === 3
      ? [values[at], values[at + 1], values[at + 2]]
      : [values[at], values[at + 1], values[at + 2], values[at + 3]]
  }

  setState(slot: number, state: unknown, expiresAt: number): void {
    if (state === undefined) {
      this.clearState(slot)
      return
    }
    const array = state as number[]
    let flags = this.flags[slot] as number
    if (array.length === this.shape(slot).inline) {
      if ((flags & WIDE) !== 0) {
        this.wide.delete(slot)
        flags &= ~WIDE
      }
      const at = slot * INLINE
      for (let i = 0; i < array.length; i++) this.values[at + i] = array[i] as number
    } else {
      const kept = (flags & WIDE) !== 0 ? this.wide.get(slot) : undefined
      // Written into the array the key holds when it is as long: a state of several windows is
      // rewritten by every decision that charges it, and a copy each time was garbage.
      if (kept !== undefined && kept.length === array.length) {
        for (let i = 0; i < array.length; i++) kept[i] = array[i] as number
      } else {
        // A state exactly as long as its values: one grown by push keeps room for a dozen more.
        this.wide.set(slot, array.slice())
        flags |= WIDE
      }
    }
    this.flags[slot] = flags | HELD
    this.expiries[slot] = expiresAt
  }

  clearState(slot: number): void {
    this.flags[slot] = (this.flags[slot] as number) & ~HELD
    this.expiries[slot] = 0
  }

  expiresAt(slot: number): number {
    return this.expiries[slot] as number
  }

  syncedAt(slot: number): number {
    return this.synced[slot] as number
  }

  setSyncedAt(slot: number, at: number): void {
    this.synced[slot] = at
  }

  /**
   * Visits up to `budget` slots from where the last sweep stopped, dropping the keys `droppable`
   * says may go.
   */
  sweep(budget: number, droppable: (slot: number) => boolean): void {
    const end = this.identifiers.length
    for (let visited = 0; visited < budget && visited < end; visited++) {
      if (this.sweepAt >= end) this.sweepAt = 0
      const slot = this.sweepAt++
      if (this.identifiers[slot] !== undefined && droppable(slot)) this.remove(slot)
    }
  }

  /**
   * CLOCK: the first slot the hand finds not used since it last came by. `looking`: only a key with
   * nothing to push (`pendingAllowed`: nothing being pushed), within VICTIM_LOOK slots (-1 past
   * them), so that a table full of units not yet pushed costs a new key a bounded look, not a
   * round of the table.
   */
  private victim(looking: boolean, pendingAllowed = false): number {
    const end = this.identifiers.length
    for (let looked = 0; !looking || looked < VICTIM_LOOK; looked++) {
      if (this.hand >= end) this.hand = 0
      const slot = this.hand++
      if (this.identifiers[slot] === undefined) continue
      if (looking && (pendingAllowed ? this.isSending(slot) : this.unsynced(slot))) continue
      const flags = this.flags[slot] as number
      if ((flags & USED) === 0) return slot
      this.flags[slot] = flags & ~USED
    }
    return -1
  }

  /** A slot past the last one used, the columns doubled (up to maxKeys) when they are full. */
  private grow(): number {
    const slot = this.used++
    if (slot >= this.shapeIds.length) {
      const capacity = Math.min(this.maxKeys, Math.max(1024, this.shapeIds.length * 2))
      this.shapeIds = grown(this.shapeIds, new Uint16Array(capacity))
      this.generations = grown(this.generations, new Uint32Array(capacity))
      this.flags = grown(this.flags, new Uint8Array(capacity))
      this.values = grown(this.values, new Float64Array(capacity * INLINE))
      this.expiries = grown(this.expiries, new Float64Array(capacity))
      this.synced = grown(this.synced, new Float64Array(capacity))
      this.segmentAt = grown(this.segmentAt, new Float64Array(capacity))
      this.segmentUnits = grown(this.segmentUnits, new Float64Array(capacity))
      this.sendingAt = grown(this.sendingAt, new Float64Array(capacity))
      this.sendingUnits = grown(this.sendingUnits, new Float64Array(capacity))
    }
    return slot
  }
}

function grown<A extends Uint8Array | Uint16Array | Uint32Array | Float64Array>(from: A, into: A): A {
  into.set(from)
  return into
}

/**
 * Slots in a growing Int32Array: the keys listed for the next sync, 4 bytes each where an array
 * of numbers takes 8, and never more than the keys tracked, since a key is listed once.
 */
export class SlotList {
  private items = new Int32Array(1024)
  length = 0

  constructor(private readonly most: number) {}

  push(slot: number): void {
    if (this.length === this.items.length) {
      const larger = new Int32Array(Math.max(this.items.length + 1, Math.min(this.most, this.items.length * 2)))
      larger.set(this.items)
      this.items = larger
    }
    this.items[this.length++] = slot
  }

  /** Keeps the slots `keep` says to keep, in order, and hands every other to `take`. */
  filter(keep: (slot: number) => boolean): void {
    let kept = 0
    for (let i = 0; i < this.length; i++) {
      const slot = this.items[i] as number
      if (keep(slot)) this.items[kept++] = slot
    }
    this.length = kept
  }
}
