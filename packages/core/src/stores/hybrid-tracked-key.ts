import type { Algorithm } from '../algorithms/algorithm.js'
import { algorithms } from '../algorithms/index.js'
import type { Window } from '../rules.js'
import type { RingEntry } from './eviction-ring.js'
import type { CounterAlgorithm } from './redis-state.js'

/**
 * One key a HybridStore decides on: its state as this process knows the fleet's (the totals of
 * the last sync, plus what this process admitted since, plus what the others are assumed to have
 * admitted since), and the units admitted here that Redis has not taken yet.
 *
 * Units are kept as segments `at, units, at, units…` (units < 0: a refund), in time order. A
 * segment holds units admitted in the same window of every window of the rule, so that the sync
 * adds them to the window they belong to. For a bucket, the sync adds a segment at its first
 * time, which refills the bucket as the spread-out charges did as long as it never ran empty
 * meanwhile and the units fit the room it had at that first time: a segment holds only such
 * units, and so, on one process, Redis ends where the process is.
 */
export class TrackedKey implements RingEntry<TrackedKey> {
  declare state: unknown
  declare expiresAt: number
  declare used: boolean
  declare prev: TrackedKey
  declare next: TrackedKey
  declare readonly key: string
  declare algorithm: CounterAlgorithm
  declare windows: readonly Window[]
  /** Admitted here since the sync under way (or the last one) took the key's units. */
  declare pending: number[] | undefined
  /** The units the sync under way is pushing, until Redis took them or failed. */
  declare sending: number[] | undefined
  /** Decided on since the last sync took it: the next sync pulls its totals. */
  declare touched: boolean
  /** In the store's list of keys for the next sync. */
  declare listed: boolean
  /** The next units start a segment of their own (a bucket found possibly empty). */
  declare split: boolean
  /** A bucket's room (units) before the decision under way: what a segment may still gather. */
  declare roomBefore: number
  /** A bucket's room before its last segment began: the segment holds at most that many units. */
  declare segmentRoom: number
  /** When the key was last synced (its state's time), 0 never. */
  declare syncedAt: number
  /** Units per ms the other processes admitted between the key's last two syncs (extrapolation). */
  declare othersPerMs: number
  /** Units of that rate already charged to `state` since `syncedAt`. */
  declare assumed: number

  constructor(key: string, algorithm: CounterAlgorithm, windows: readonly Window[]) {
    this.state = undefined
    this.expiresAt = 0
    this.used = false
    this.prev = this
    this.next = this
    this.key = key
    this.algorithm = algorithm
    this.windows = windows
    this.pending = undefined
    this.sending = undefined
    this.touched = false
    this.listed = false
    this.split = false
    this.roomBefore = 0
    this.segmentRoom = 0
    this.syncedAt = 0
    this.othersPerMs = 0
    this.assumed = 0
  }

  get model(): Algorithm<unknown> {
    return algorithms[this.algorithm]
  }

  /** Units admitted here and not yet taken by Redis: pushed by a sync under way, or waiting. */
  get unsynced(): boolean {
    return this.pending !== undefined || this.sending !== undefined
  }

  /** Records `units` admitted (or, negative, refunded) at `now`. */
  record(now: number, units: number): void {
    const pending = this.pending
    const split = this.split
    this.split = false
    if (pending !== undefined) {
      const last = pending.length - 2
      const lastUnits = pending[last + 1] as number
      if (!split && lastUnits > 0 === units > 0 && this.sameSpan(pending[last] as number, now, lastUnits + units)) {
        pending[last + 1] = lastUnits + units
        return
      }
      pending.push(now, units)
    } else {
      this.pending = [now, units]
    }
    this.segmentRoom = this.roomBefore
  }

  /**
   * Called before a decision reads the state: a bucket that may be empty (full of tokens) at
   * `now` starts its next units in a segment of their own, since the sync would otherwise count
   * them from the segment's first time and refill the bucket for time it spent empty.
   */
  beforeDecision(now: number): void {
    if (this.algorithm !== 'token-bucket' && this.algorithm !== 'gcra') return
    const model = this.model
    let room = Number.POSITIVE_INFINITY
    for (const window of this.windows) {
      const remaining = model.remaining(this.state, window, now)
      if (remaining >= window.limit) this.split = true
      if (remaining < room) room = remaining
    }
    this.roomBefore = room
  }

  /**
   * Charges the units the other processes are assumed to have admitted since the last sync
   * (extrapolation), as far as they have not been charged yet.
   */
  assumeOthers(now: number): void {
    const due = Math.floor(this.othersPerMs * (now - this.syncedAt)) - this.assumed
    if (due > 0) {
      this.state = this.model.charge(this.state, this.windows, now, due)
      this.assumed += due
    }
  }

  /**
   * Whether a segment admitted from `at` on may also hold units admitted at `now`, `total` units
   * then. A bucket's segment is added at its first time, so it may not hold more than the room
   * the bucket had then: more would pass the capacity there, which Redis caps.
   */
  private sameSpan(at: number, now: number, total: number): boolean {
    if (this.algorithm === 'token-bucket' || this.algorithm === 'gcra') return total <= this.segmentRoom
    for (const window of this.windows) {
      if (Math.floor(at / window.periodMs) !== Math.floor(now / window.periodMs)) return false
    }
    return true
  }
}

/** The units of `segments` in total, refunds subtracted. */
export function unitsOf(segments: readonly number[] | undefined): number {
  let units = 0
  if (segments !== undefined) for (let i = 1; i < segments.length; i += 2) units += segments[i] as number
  return units
}

/** The units `state` holds in `window` at `now`, as its model counts them. */
export function usedOf(model: Algorithm<unknown>, state: unknown, window: Window, now: number): number {
  return window.limit - model.remaining(state, window, now)
}
