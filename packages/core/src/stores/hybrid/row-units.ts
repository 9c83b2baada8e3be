import type { Window } from '../../rules/rules.js'
import { asSegment, fold, foldAfter, foldedOf, isFolded } from './bucket-fold.js'

/** One segment of units not yet pushed, in `segmentAt` and `segmentUnits`. */
const ONE_SEGMENT = 1
/** A push of the key's units is under way: one segment in `sendingAt` and `sendingUnits` (SENDING_ONE), else in `sendingMany`. */
const SENDING = 2
const SENDING_ONE = 4

/**
 * The units a key table's rows admitted here and Redis has not taken yet, by row: those waiting
 * for a sync (pending) and those a push under way carries (sending). Units admitted since the
 * sync under way (or the last one) took the key's are segments `at, units` (segments.ts): most
 * keys have one per sync, kept in columns; a key with more has all of them in `segments`
 * instead, a bucket's folded (bucket-fold.ts). A push carries one segment in columns, as most
 * keys push, or the key's segments in `sendingMany`.
 */
export class RowUnits {
  private flags = new Uint8Array(0)
  private segmentAt = new Float64Array(0)
  private segmentUnits = new Float64Array(0)
  private readonly segments = new Map<number, number[]>()
  private withPending = 0
  private sendingAt = new Float64Array(0)
  private sendingUnits = new Float64Array(0)
  private readonly sendingMany = new Map<number, number[]>()
  private sendingKeys = 0

  /** The columns hold `capacity` rows. */
  grow(capacity: number): void {
    this.flags = grown(this.flags, new Uint8Array(capacity))
    this.segmentAt = grown(this.segmentAt, new Float64Array(capacity))
    this.segmentUnits = grown(this.segmentUnits, new Float64Array(capacity))
    this.sendingAt = grown(this.sendingAt, new Float64Array(capacity))
    this.sendingUnits = grown(this.sendingUnits, new Float64Array(capacity))
  }

  /** The row's key is forgotten: its units with it. */
  clear(row: number): void {
    this.clearPending(row)
    this.endSending(row)
    this.flags[row] = 0
  }

  /** The key's rule changed its windows: a bucket's units folded for the old ones are pushed as one segment, at their last time. */
  reshape(row: number): void {
    const pending = this.segments.get(row)
    if (pending !== undefined && isFolded(pending)) this.segments.set(row, asSegment(pending))
    const sending = this.sendingMany.get(row)
    if (sending !== undefined && isFolded(sending)) this.sendingMany.set(row, asSegment(sending))
  }

  unsynced(row: number): boolean {
    return this.hasPending(row) || this.isSending(row)
  }

  /** Whether a push of the key's units is under way. */
  isSending(row: number): boolean {
    return ((this.flags[row] as number) & SENDING) !== 0
  }

  /** Keys with units not yet pushed or a push under way (a scan of the flags: for stats, not decisions). */
  get unsyncedCount(): number {
    if (this.sendingKeys === 0) return this.withPending
    let sendingOnly = 0
    const { flags } = this
    for (let row = 0; row < flags.length; row++) {
      if (((flags[row] as number) & SENDING) !== 0 && !this.hasPending(row)) sendingOnly++
    }
    return this.withPending + sendingOnly
  }

  /** Whether the units a push under way carries are one segment: `sendingAtOf`, `sendingUnitsOf`. */
  sendsOneSegment(row: number): boolean {
    return ((this.flags[row] as number) & SENDING_ONE) !== 0
  }

  sendingAtOf(row: number): number {
    return this.sendingAt[row] as number
  }

  sendingUnitsOf(row: number): number {
    return this.sendingUnits[row] as number
  }

  /** The units a push under way carries (a copy when in the columns); undefined for none. */
  sendingOf(row: number): number[] | undefined {
    const flags = this.flags[row] as number
    if ((flags & SENDING) === 0) return undefined
    if ((flags & SENDING_ONE) !== 0) return [this.sendingAt[row] as number, this.sendingUnits[row] as number]
    return this.sendingMany.get(row)
  }

  /** Hands the key's pending units to a push; false when it had none (the key is only read). */
  startSending(row: number): boolean {
    const flags = this.flags[row] as number
    if ((flags & ONE_SEGMENT) !== 0) {
      this.sendingAt[row] = this.segmentAt[row] as number
      this.sendingUnits[row] = this.segmentUnits[row] as number
      this.clearPending(row)
      this.flags[row] = (this.flags[row] as number) | SENDING | SENDING_ONE
      this.sendingKeys++
      return true
    }
    const segments = this.segments.get(row)
    if (segments === undefined) return false
    this.clearPending(row)
    this.setSending(row, segments)
    return true
  }

  /** Sets the units a push of the key carries. */
  setSending(row: number, units: number[]): void {
    this.endSending(row)
    this.sendingMany.set(row, units)
    this.flags[row] = (this.flags[row] as number) | SENDING
    this.sendingKeys++
  }

  /** Ends the key's push under way: Redis took its units, or they go back (`putBack`); returns them. */
  endSending(row: number): number[] | undefined {
    const flags = this.flags[row] as number
    if ((flags & SENDING) === 0) return undefined
    const units = this.sendingOf(row)
    this.sendingMany.delete(row)
    this.flags[row] = flags & ~(SENDING | SENDING_ONE)
    this.sendingKeys--
    return units
  }

  /** Keys with units admitted here that no sync has taken yet. */
  get pendingKeys(): number {
    return this.withPending
  }

  hasPending(row: number): boolean {
    return ((this.flags[row] as number) & ONE_SEGMENT) !== 0 || this.segments.has(row)
  }

  /** The key's pending segments (or a bucket's units folded), a copy when they are in the columns; undefined for none. */
  pendingOf(row: number): number[] | undefined {
    if (((this.flags[row] as number) & ONE_SEGMENT) !== 0) {
      return [this.segmentAt[row] as number, this.segmentUnits[row] as number]
    }
    return this.segments.get(row)
  }

  /** The last pending segment's time; call only when `hasPending`, and not for a bucket. */
  lastSegmentAt(row: number): number {
    if (((this.flags[row] as number) & ONE_SEGMENT) !== 0) return this.segmentAt[row] as number
    const segments = this.segments.get(row) as number[]
    return segments[segments.length - 2] as number
  }

  lastSegmentUnits(row: number): number {
    if (((this.flags[row] as number) & ONE_SEGMENT) !== 0) return this.segmentUnits[row] as number
    const segments = this.segments.get(row) as number[]
    return segments[segments.length - 1] as number
  }

  /** Adds units to the last pending segment. */
  addToLastSegment(row: number, units: number): void {
    if (((this.flags[row] as number) & ONE_SEGMENT) !== 0) {
      this.segmentUnits[row] = (this.segmentUnits[row] as number) + units
      return
    }
    const segments = this.segments.get(row) as number[]
    segments[segments.length - 1] = (segments[segments.length - 1] as number) + units
  }

  /**
   * Folds units admitted on a bucket into its pending ones: in the columns while they are the
   * first, then folded, so that a key holds a fixed number of values whatever its rate.
   */
  foldBucket(row: number, windows: readonly Window[], at: number, units: number): void {
    const pending = this.pendingOf(row)
    if (pending === undefined) {
      this.appendSegment(row, at, units)
      return
    }
    if (isFolded(pending)) {
      fold(pending, windows, at, units)
      return
    }
    // Segments, in the columns or (given back by a failed push) in `segments`: folded from now on.
    const folded = foldedOf(windows, pending)
    fold(folded, windows, at, units)
    this.flags[row] = (this.flags[row] as number) & ~ONE_SEGMENT
    this.segments.set(row, folded)
  }

  /** Starts a pending segment after the key's others, if any. */
  appendSegment(row: number, at: number, units: number): void {
    const flags = this.flags[row] as number
    if ((flags & ONE_SEGMENT) !== 0) {
      this.flags[row] = flags & ~ONE_SEGMENT
      this.segments.set(row, [this.segmentAt[row] as number, this.segmentUnits[row] as number, at, units])
      return
    }
    const segments = this.segments.get(row)
    if (segments !== undefined) {
      segments.push(at, units)
      return
    }
    this.flags[row] = flags | ONE_SEGMENT
    this.segmentAt[row] = at
    this.segmentUnits[row] = units
    this.withPending++
  }

  /** The key's pending segments, handed over (to a sync), and none left. */
  takePending(row: number): number[] | undefined {
    const taken = this.pendingOf(row)
    this.clearPending(row)
    return taken
  }

  /** Puts segments (or a bucket's folded units) back before the key's pending ones (a push Redis did not take). */
  putBack(row: number, segments: readonly number[], shape: { bucket: boolean; windows: readonly Window[] }): void {
    const after = this.takePending(row)
    if (shape.bucket) {
      const folded = foldedOf(shape.windows, segments)
      if (after !== undefined) foldAfter(folded, shape.windows, after)
      this.segments.set(row, folded)
      this.withPending++
      return
    }
    const all = [...segments, ...(after ?? [])]
    for (let i = 0; i < all.length; i += 2) this.appendSegment(row, all[i] as number, all[i + 1] as number)
  }

  clearPending(row: number): void {
    if (!this.hasPending(row)) return
    this.flags[row] = (this.flags[row] as number) & ~ONE_SEGMENT
    this.segments.delete(row)
    this.withPending--
  }
}

function grown<A extends Uint8Array | Float64Array>(from: A, into: A): A {
  into.set(from)
  return into
}
