import type { Algorithm } from '../algorithms/algorithm.js'
import type { Window } from '../rules.js'
import type { KeySlots, Shape } from './hybrid-slots.js'

/**
 * The units a HybridStore admitted and Redis has not taken yet, per key, as segments
 * `at, units, at, units…` (units < 0: a refund), in time order. A segment holds units admitted in
 * the same window of every window of the rule, so that the sync adds them to the window they
 * belong to. For a bucket, the sync adds a segment at its first time, which refills the bucket as
 * the spread-out charges did as long as it never ran empty meanwhile and the units fit the room it
 * had at that first time: a segment holds only such units, and so, on one process, Redis ends
 * where the process is.
 */

/**
 * Before a decision reads a bucket's state: returns its room (units that fit), and marks it when
 * it may be empty (full of tokens), in which case its next units start a segment of their own,
 * since the sync would otherwise count them from the segment's first time and refill the bucket
 * for time it spent empty. 0 for the other algorithms.
 */
export function beforeDecision(slots: KeySlots, slot: number, shape: Shape, now: number): number {
  if (!shape.bucket) return 0
  const state = slots.stateOf(slot, now)
  let room = Number.POSITIVE_INFINITY
  for (const window of shape.windows) {
    const remaining = shape.model.remaining(state, window, now)
    if (remaining >= window.limit) slots.setSplit(slot, true)
    if (remaining < room) room = remaining
  }
  return room
}

/**
 * Records `units` admitted (or, negative, refunded) at `now` on the key; `roomBefore` is what
 * `beforeDecision` returned for this decision.
 */
export function record(
  slots: KeySlots,
  slot: number,
  shape: Shape,
  now: number,
  units: number,
  roomBefore: number,
): void {
  const split = slots.split(slot)
  slots.setSplit(slot, false)
  if (slots.hasPending(slot)) {
    const lastUnits = slots.lastSegmentUnits(slot)
    const total = lastUnits + units
    if (
      !split &&
      lastUnits > 0 === units > 0 &&
      sameSpan(shape, slots.lastSegmentAt(slot), now, total, slots.room(slot))
    ) {
      slots.addToLastSegment(slot, units)
      return
    }
  }
  slots.appendSegment(slot, now, units)
  slots.setRoom(slot, roomBefore)
}

/**
 * Whether a segment admitted from `at` on may also hold units admitted at `now`, `total` units
 * then. A bucket's segment may not hold more than the room the bucket had at its first time:
 * more would pass the capacity there, which Redis caps.
 */
function sameSpan(shape: Shape, at: number, now: number, total: number, room: number): boolean {
  if (shape.bucket) return total <= room
  for (const window of shape.windows) {
    if (Math.floor(at / window.periodMs) !== Math.floor(now / window.periodMs)) return false
  }
  return true
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
