import { scaleOf } from '../../algorithms/bucket.js'
import { type PeriodState, valuesOf, withValues } from '../../algorithms/period-state.js'
import type { Window } from '../../rules/rules.js'

/**
 * A bucket's units not yet pushed, folded into a fixed number of values however many charges
 * made them: `[first, last, units, floor, shift, floor, shift, …]`, a pair per window.
 *
 * Why: the sync adds a segment `at, units` to a bucket by refilling it to `at` (its deficit, what
 * it lacks of full, falls to no less than 0) and then adding the units. Units charged on a bucket
 * that refilled in between cannot join an earlier segment, since the sync would count them from
 * the earlier time and refill the bucket for time it spent full; so a key charged a thousand
 * times a second on a limit it never nears sent a thousand segments each sync. Each step, though,
 * maps a deficit d to max(a, d + b), and such maps compose into one of the same form: the
 * process folds each charge into `floor` and `shift`, per window in the window's units
 * (bucket.ts), and the sync applies `max(floor, d + shift)` to the deficit refilled to `first`.
 * That is exactly what the segments one by one would give whenever Redis last measured the
 * bucket at or before `first`, as it does for a key that only this process charges; otherwise
 * the refill the fold counts before that measurement is taken back (sync: lua/lib/bucket.lua).
 * Odd in length, where segments come in pairs.
 */
export type FoldedUnits = number[]

const FIRST = 0
const LAST = 1
const UNITS = 2
const PAIRS = 3

/** A deficit's shift never needs to go below this: every deficit a double holds exactly is then under the floor. */
const LOWEST_SHIFT = -Number.MAX_SAFE_INTEGER

export function isFolded(pending: readonly number[]): boolean {
  return pending.length % 2 === 1
}

/** The units pending in segments or folded, refunds subtracted. */
export function pendingUnits(pending: readonly number[] | undefined): number {
  if (pending === undefined) return 0
  if (isFolded(pending)) return pending[UNITS] as number
  let units = 0
  for (let i = 1; i < pending.length; i += 2) units += pending[i] as number
  return units
}

/** Segments `at, units, …` (or units folded already, copied) folded for `windows`. */
export function foldedOf(windows: readonly Window[], pending: readonly number[]): FoldedUnits {
  if (isFolded(pending)) return pending.slice()
  const folded: FoldedUnits = new Array(PAIRS + 2 * windows.length).fill(0)
  folded[FIRST] = pending[0] as number
  folded[LAST] = pending[0] as number
  for (let i = 0; i < pending.length; i += 2) fold(folded, windows, pending[i] as number, pending[i + 1] as number)
  return folded
}

/**
 * Folds `units` admitted (negative: refunded) at `at` into `folded`, in place: the bucket refills
 * from the last charge to `at`, then takes the units, and no deficit goes below 0.
 */
export function fold(folded: FoldedUnits, windows: readonly Window[], at: number, units: number): void {
  const last = folded[LAST] as number
  // A charge stamped before the last one (a clock set back) refills nothing, as in the sync.
  const gap = at > last ? at - last : 0
  for (let k = 0; k < windows.length; k++) {
    const { perToken, perMs } = scaleOf(windows[k] as Window)
    const step = units * perToken
    const shift = Math.max(LOWEST_SHIFT, (folded[PAIRS + 2 * k + 1] as number) + step - gap * perMs)
    const floor = Math.max(0, step, (folded[PAIRS + 2 * k] as number) + step - gap * perMs)
    folded[PAIRS + 2 * k] = floor
    folded[PAIRS + 2 * k + 1] = shift
  }
  if (at > last) folded[LAST] = at
  folded[UNITS] = (folded[UNITS] as number) + units
}

/** `later`'s units folded in after `earlier`'s, in place in `earlier`. */
export function foldAfter(earlier: FoldedUnits, windows: readonly Window[], later: readonly number[]): void {
  if (!isFolded(later)) {
    for (let i = 0; i < later.length; i += 2) fold(earlier, windows, later[i] as number, later[i + 1] as number)
    return
  }
  const last = earlier[LAST] as number
  const first = later[FIRST] as number
  const gap = first > last ? first - last : 0
  for (let k = 0; k < windows.length; k++) {
    const { perMs } = scaleOf(windows[k] as Window)
    const floor = later[PAIRS + 2 * k] as number
    const shift = later[PAIRS + 2 * k + 1] as number
    // max(floor, max(0, d − gap) + shift) after max(floor₀, x + shift₀); a floor is never below
    // its shift (both start at 0 and move alike), so max(floor, shift) is the floor.
    earlier[PAIRS + 2 * k] = Math.max(floor, (earlier[PAIRS + 2 * k] as number) + shift - gap * perMs)
    earlier[PAIRS + 2 * k + 1] = Math.max(LOWEST_SHIFT, (earlier[PAIRS + 2 * k + 1] as number) + shift - gap * perMs)
  }
  earlier[LAST] = Math.max(last, later[LAST] as number)
  earlier[UNITS] = (earlier[UNITS] as number) + (later[UNITS] as number)
}

/** The time and units of folded units as one segment, at their last time: for a key whose rule is no longer a bucket of these windows. */
export function asSegment(folded: readonly number[]): number[] {
  return [folded[LAST] as number, folded[UNITS] as number]
}

/**
 * The bucket state with the folded units applied, as the sync applies them to a key in Redis
 * (lua/lib/bucket.lua): `state` is the model's (bucket.ts), its level the capacity less the deficit.
 */
export function applyFolded(
  state: PeriodState | undefined,
  windows: readonly Window[],
  folded: readonly number[],
): PeriodState | undefined {
  const first = folded[FIRST] as number
  const last = folded[LAST] as number
  let next = state
  for (let k = 0; k < windows.length; k++) {
    const window = windows[k] as Window
    const { perMs, capacity } = scaleOf(window)
    const at = valuesOf(next, window.periodMs, 2)
    let measured = first
    let deficit = 0
    if (at >= 0) {
      measured = (next as PeriodState)[at + 1] as number
      deficit = capacity - ((next as PeriodState)[at] as number)
    }
    if (measured < first) deficit = Math.max(0, deficit - (first - measured) * perMs)
    // The refill the fold counted before the bucket's measurement, which already holds it.
    const counted = last - first - Math.max(0, last - Math.max(first, measured))
    const taken = counted * perMs
    deficit = Math.max(
      (folded[PAIRS + 2 * k] as number) + taken,
      deficit + (folded[PAIRS + 2 * k + 1] as number) + taken,
    )
    next = withValues(next, at, window.periodMs, capacity - deficit, Math.max(measured, last))
  }
  return next
}
