import type { Algorithm } from '../../algorithms/algorithm.js'
import type { PeriodState } from '../../algorithms/period-state.js'
import type { Window } from '../../rules/rules.js'
import { applyFolded, isFolded } from './bucket-fold.js'
import type { KeyTable, Shape } from './key-table.js'

/**
 * The units a HybridStore admitted and Redis has not taken yet, per key, as segments
 * `at, units, at, units…` (units < 0: a refund), in time order. A segment holds units admitted in
 * the same window of every window of the rule, so that the sync adds them to the window they
 * belong to. A bucket's units are folded instead (bucket-fold.ts): a segment could hold
 * only units charged before the bucket next refilled, and a bucket kept below its limit refills
 * between most charges.
 */

/** Records `units` admitted (or, negative, refunded) at `now` on the key. */
export function record(rows: KeyTable, row: number, shape: Shape, now: number, units: number): void {
  if (shape.bucket) {
    rows.units.foldBucket(row, shape.windows, now, units)
    return
  }
  if (rows.units.hasPending(row)) {
    const lastUnits = rows.units.lastSegmentUnits(row)
    if (lastUnits > 0 === units > 0 && sameWindows(shape, rows.units.lastSegmentAt(row), now)) {
      rows.units.addToLastSegment(row, units)
      return
    }
  }
  rows.units.appendSegment(row, now, units)
}

/** Whether `at` and `now` fall in the same window of every window of the rule. */
function sameWindows(shape: Shape, at: number, now: number): boolean {
  for (const window of shape.windows) {
    if (Math.floor(at / window.periodMs) !== Math.floor(now / window.periodMs)) return false
  }
  return true
}

/** The units `state` holds in `window` at `now`, as its model counts them. */
export function usedOf(model: Algorithm<unknown>, state: unknown, window: Window, now: number): number {
  return window.limit - model.remaining(state, window, now)
}

/** `state` with a key's pending units (segments, or a bucket's folded units) applied in order, as the sync script applies them. */
export function withUnits(
  model: Algorithm<unknown>,
  windows: readonly Window[],
  state: unknown,
  units: readonly number[] | undefined,
): unknown {
  if (units === undefined) return state
  if (isFolded(units)) return applyFolded(state as PeriodState | undefined, windows, units)
  let next = state
  for (let i = 0; i < units.length; i += 2) {
    const at = units[i] as number
    const n = units[i + 1] as number
    next = n > 0 ? model.charge(next, windows, at, n) : model.refund(next, windows, at, -n)
  }
  return next
}
