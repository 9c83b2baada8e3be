import calculateSlot from 'cluster-key-slot'
import type { Algorithm } from '../../algorithms/algorithm.js'
import { algorithms } from '../../algorithms/index.js'
import type { KeyBuilder } from '../../rules/keys.js'
import type { Window } from '../../rules/rules.js'
import type { StateTable } from '../shared/evaluate-locally.js'
import type { CounterAlgorithm } from '../shared/redis-state.js'
import { RowUnits } from './row-units.js'

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
const INLINE = 4
/** Rows the eviction hand looks at for a key with nothing to push. */
const VICTIM_LOOK = 1024
/** Shape ids are kept in 16 bits. */
const MAX_SHAPES = 0xffff

/**
 * The keys a HybridStore tracks, as columns: a row per key, its fields in typed arrays, so that a
 * key costs a Map entry and the identifier and a few numbers beside, where a key as an object of
 * its own, with its state as an array, cost over twice as much (`pnpm --filter @tollgate/bench
 * hybrid-memory` measures it). A one-window state lives in `values`; a state of
 * several windows, rarer, in `wide` as the model's array. Units not yet pushed are in columns
 * too (`units`, row-units.ts).
 *
 * The order a full table forgets in is CLOCK over the rows: a hand goes round and takes the
 * first row not used since it last came by, a key with nothing to push first: one with units
 * not yet pushed goes only once they are handed to a push of their own, never while a push of
 * its units is under way, so that no unit admitted is lost with its key.
 */
export class KeyTable {
  /** Rows by rule, then identifier: a decision finds its key without building its Redis name. */
  private readonly index = new Map<string, Map<string, number>>()
  private count = 0
  private readonly shapesByWindows = new WeakMap<readonly Window[], Map<string, Shape>>()
  private readonly shapes: Shape[] = []
  private identifiers: Array<string | undefined> = []
  private shapeIds = new Uint16Array(0)
  /** Bumped whenever a row is freed: an answer for a row's earlier key is not its key's. */
  private generations = new Uint32Array(0)
  private flags = new Uint8Array(0)
  private values = new Float64Array(0)
  private expiries = new Float64Array(0)
  private synced = new Float64Array(0)
  /** Each row's Cluster slot plus one; 0 until asked for (`slot`). */
  private slots = new Uint16Array(0)
  private readonly wide = new Map<number, number[]>()
  /** Units admitted here that Redis has not taken yet, by row. */
  readonly units = new RowUnits()
  /** Units per ms the other processes admitted between the key's last two syncs, and how many of them were charged since. */
  readonly others = new Map<number, { perMs: number; assumed: number }>()
  private readonly free: number[] = []
  private used = 0
  private hand = 0
  private sweepAt = 0

  readonly table: StateTable<number> = {
    get: (row, now) => this.stateOf(row, now),
    set: (row, state, expiresAt) => this.setState(row, state, expiresAt),
    delete: (row) => this.clearState(row),
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
  key(row: number): string {
    const shape = this.shape(row)
    return this.keys.key(shape.rule, shape.algorithm, this.identifiers[row] as string)
  }

  /** The key's Cluster slot, found once per key: a sync on a Cluster groups its keys by master, then slot. */
  slot(row: number): number {
    const known = this.slots[row] as number
    if (known !== 0) return known - 1
    const slot = calculateSlot(this.key(row))
    this.slots[row] = slot + 1
    return slot
  }

  shape(row: number): Shape {
    return this.shapes[this.shapeIds[row] as number] as Shape
  }

  generation(row: number): number {
    return this.generations[row] as number
  }

  /** Whether the row still holds the key it held at `generation` (it may have been freed and given to another). */
  holds(row: number, generation: number): boolean {
    return this.identifiers[row] !== undefined && this.generations[row] === generation
  }

  /** Whether a new key needs another's row. */
  get full(): boolean {
    return this.count >= this.maxKeys
  }

  /**
   * Forgets a key with nothing to push, the one the eviction hand finds unused, to make room for
   * a new one; false when none of the rows looked at could go (each holds units a sync has not
   * taken yet).
   */
  evictSynced(): boolean {
    const row = this.victim(true)
    if (row < 0) return false
    this.remove(row)
    return true
  }

  /**
   * Forgets a key with no push under way, handing its units not yet pushed to `push` first; false
   * when every row looked at had a push under way (its answer is the key's: the next sync ends it).
   */
  evictPushing(push: (row: number, units: number[]) => void): boolean {
    const row = this.victim(true, true)
    if (row < 0) return false
    const units = this.units.takePending(row)
    if (units !== undefined) push(row, units)
    this.remove(row)
    return true
  }

  /** Forgets the key the eviction hand finds unused, whatever it holds; true when it held units not yet pushed. */
  evictAny(): boolean {
    const row = this.victim(false)
    const unsynced = this.units.unsynced(row)
    this.remove(row)
    return unsynced
  }

  /** The key's row, new: call when the table is not `full`. */
  add(identifier: string, shape: Shape): number {
    const row = this.free.pop() ?? this.grow()
    let byIdentifier = this.index.get(shape.rule)
    if (byIdentifier === undefined) {
      byIdentifier = new Map()
      this.index.set(shape.rule, byIdentifier)
    }
    // Held for as long as the key is tracked: flat, rather than the rope of parts it may have
    // been built from, which would keep every part alive beside it. Reading a character flattens it.
    identifier.charCodeAt(0)
    byIdentifier.set(identifier, row)
    this.count++
    this.identifiers[row] = identifier
    this.shapeIds[row] = shape.id
    this.flags[row] = 0
    this.expiries[row] = 0
    this.synced[row] = 0
    this.slots[row] = 0
    return row
  }

  /** The key's rule changed its windows (or is another limiter's equal rule): its state stays, found by period. */
  reshape(row: number, shape: Shape): void {
    const state = this.stateOf(row, Number.NEGATIVE_INFINITY)
    this.units.reshape(row)
    this.shapeIds[row] = shape.id
    if (state !== undefined) this.setState(row, state, this.expiries[row] as number)
  }

  remove(row: number): void {
    const identifier = this.identifiers[row]
    if (identifier === undefined) return
    const byIdentifier = this.index.get(this.shape(row).rule)
    byIdentifier?.delete(identifier)
    if (byIdentifier?.size === 0) this.index.delete(this.shape(row).rule)
    this.count--
    this.identifiers[row] = undefined
    this.generations[row] = (this.generations[row] as number) + 1
    this.units.clear(row)
    if (((this.flags[row] as number) & WIDE) !== 0) this.wide.delete(row)
    this.flags[row] = 0
    this.others.delete(row)
    this.free.push(row)
  }

  markUsed(row: number): void {
    this.flags[row] = (this.flags[row] as number) | USED
  }

  /** Marks the key decided on since the last sync; true when it was not listed for the next sync yet. */
  touch(row: number): boolean {
    const flags = this.flags[row] as number
    this.flags[row] = flags | USED | TOUCHED | LISTED
    return (flags & LISTED) === 0
  }

  /** Lists the key for the next sync; true when it was not listed yet. */
  list(row: number): boolean {
    const flags = this.flags[row] as number
    this.flags[row] = flags | LISTED
    return (flags & LISTED) === 0
  }

  unlist(row: number): void {
    this.flags[row] = (this.flags[row] as number) & ~(LISTED | TOUCHED)
  }

  listed(row: number): boolean {
    return ((this.flags[row] as number) & LISTED) !== 0
  }

  /** The state the models decide on, or undefined; one that expired is dropped first. */
  stateOf(row: number, now: number): unknown {
    const flags = this.flags[row] as number
    if ((flags & HELD) === 0) return undefined
    if ((this.expiries[row] as number) <= now) {
      this.clearState(row)
      return undefined
    }
    if ((flags & WIDE) !== 0) return this.wide.get(row)
    const at = row * INLINE
    const { values } = this
    return this.shape(row).inline === 3
      ? [values[at], values[at + 1], values[at + 2]]
      : [values[at], values[at + 1], values[at + 2], values[at + 3]]
  }

  setState(row: number, state: unknown, expiresAt: number): void {
    if (state === undefined) {
      this.clearState(row)
      return
    }
    const array = state as number[]
    let flags = this.flags[row] as number
    if (array.length === this.shape(row).inline) {
      if ((flags & WIDE) !== 0) {
        this.wide.delete(row)
        flags &= ~WIDE
      }
      const at = row * INLINE
      for (let i = 0; i < array.length; i++) this.values[at + i] = array[i] as number
    } else {
      const kept = (flags & WIDE) !== 0 ? this.wide.get(row) : undefined
      // Written into the array the key holds when it is as long: a state of several windows is
      // rewritten by every decision that charges it, and a copy each time was garbage.
      if (kept !== undefined && kept.length === array.length) {
        for (let i = 0; i < array.length; i++) kept[i] = array[i] as number
      } else {
        // A state exactly as long as its values: one grown by push keeps room for a dozen more.
        this.wide.set(row, array.slice())
        flags |= WIDE
      }
    }
    this.flags[row] = flags | HELD
    this.expiries[row] = expiresAt
  }

  clearState(row: number): void {
    this.flags[row] = (this.flags[row] as number) & ~HELD
    this.expiries[row] = 0
  }

  expiresAt(row: number): number {
    return this.expiries[row] as number
  }

  syncedAt(row: number): number {
    return this.synced[row] as number
  }

  setSyncedAt(row: number, at: number): void {
    this.synced[row] = at
  }

  /**
   * Visits up to `budget` rows from where the last sweep stopped, dropping the keys `droppable`
   * says may go.
   */
  sweep(budget: number, droppable: (row: number) => boolean): void {
    const end = this.identifiers.length
    for (let visited = 0; visited < budget && visited < end; visited++) {
      if (this.sweepAt >= end) this.sweepAt = 0
      const row = this.sweepAt++
      if (this.identifiers[row] !== undefined && droppable(row)) this.remove(row)
    }
  }

  /**
   * CLOCK: the first row the hand finds not used since it last came by. `looking`: only a key with
   * nothing to push (`pendingAllowed`: nothing being pushed), within VICTIM_LOOK rows (-1 past
   * them), so that a table full of units not yet pushed costs a new key a bounded look, not a
   * round of the table.
   */
  private victim(looking: boolean, pendingAllowed = false): number {
    const end = this.identifiers.length
    for (let looked = 0; !looking || looked < VICTIM_LOOK; looked++) {
      if (this.hand >= end) this.hand = 0
      const row = this.hand++
      if (this.identifiers[row] === undefined) continue
      if (looking && (pendingAllowed ? this.units.isSending(row) : this.units.unsynced(row))) continue
      const flags = this.flags[row] as number
      if ((flags & USED) === 0) return row
      this.flags[row] = flags & ~USED
    }
    return -1
  }

  /** A row past the last one used, the columns doubled (up to maxKeys) when they are full. */
  private grow(): number {
    const row = this.used++
    if (row >= this.shapeIds.length) {
      const capacity = Math.min(this.maxKeys, Math.max(1024, this.shapeIds.length * 2))
      this.shapeIds = grown(this.shapeIds, new Uint16Array(capacity))
      this.generations = grown(this.generations, new Uint32Array(capacity))
      this.flags = grown(this.flags, new Uint8Array(capacity))
      this.values = grown(this.values, new Float64Array(capacity * INLINE))
      this.expiries = grown(this.expiries, new Float64Array(capacity))
      this.synced = grown(this.synced, new Float64Array(capacity))
      this.slots = grown(this.slots, new Uint16Array(capacity))
      this.units.grow(capacity)
    }
    return row
  }
}

function grown<A extends Uint8Array | Uint16Array | Uint32Array | Float64Array>(from: A, into: A): A {
  into.set(from)
  return into
}
