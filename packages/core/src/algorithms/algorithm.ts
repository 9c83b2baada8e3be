import type { Window } from '../rules/rules.js'
import type { StoreWindowResult } from './window-result.js'

/** A time that never comes: the answer of `fitsAt` when a cost exceeds a window's limit. */
export const NEVER = Number.POSITIVE_INFINITY

/** What `read` found of a target, as bits: state was moved back to now (so it must be written). */
export const CLAMPED = 1
/** …a window cannot take the cost now. */
export const LIMITED = 2
/** …every window can, but one sheds it (its random number is below that window's drop probability). */
export const SHEDS = 4

/**
 * The pure model of one algorithm over the state of one (rule, identifier) pair, which holds
 * every window of the rule. Times are integer milliseconds. The Lua scripts in `lua/` implement
 * the same arithmetic in the same order, and one conformance suite holds both to it.
 */
export interface Algorithm<S> {
  /** The earliest time ≥ `now` at which `need` more units fit in `window`, or NEVER. */
  fitsAt(state: S | undefined, window: Window, now: number, need: number): number
  /** Whole units that still fit in `window` at `now`. */
  remaining(state: S | undefined, window: Window, now: number): number
  /**
   * What `window` holds at `now`, exactly, in steps of 1 / `stepsPerUnit(window)` unit: a
   * bucket's fill is fractional. Shedding weighs it (shedding.ts).
   */
  used(state: S | undefined, window: Window, now: number): number
  /** How many steps of `used` make one unit: 1 for the counters, a bucket's units per token. */
  stepsPerUnit(window: Window): number
  /**
   * The window at `now`, read from the state once, as the Lua reports it: the whole units that
   * still fit, when it next frees a unit (`now` if nothing is used, else when one unit more than
   * remains fits), and `fitsAt` for `cost`.
   */
  answer(state: S | undefined, window: Window, now: number, cost: number): StoreWindowResult
  /** Charges `cost` to every window; callers check `fitsAt` first. */
  charge(state: S | undefined, windows: readonly Window[], now: number, cost: number): S
  /** Gives back up to `cost` units, most recent first, as far as each window still counts them; `undefined` when nothing is left. */
  refund(state: S | undefined, windows: readonly Window[], now: number, cost: number): S | undefined
  /** From this time on the state is indistinguishable from no state, so it may be dropped. */
  expiresAt(state: S, windows: readonly Window[]): number
  /**
   * A target's first step in an in-process decision (stores/shared/evaluate-locally.ts), every window
   * at once. First it moves back to `now`, in place, whatever a faster clock stamped later than
   * `now` (another app server's, or this one's before it was set back), so that such state ends
   * within a period of this clock instead of the skew (CLAMPED: the state must then be
   * written). Then it checks whether `cost` fits each window and, given the decision's `random`,
   * whether one sheds it. The bits CLAMPED, LIMITED, SHEDS. One call per target, not one per
   * window and step: the calls into an algorithm are the ones that cannot be inlined where
   * several algorithms meet, so each algorithm makes its own inner calls (bench/README.md).
   */
  read(state: S | undefined, windows: readonly Window[], now: number, cost: number, random: number | undefined): number
  /**
   * Its second: charges `cost` (`delta` 1), refunds it (-1) or neither (0), then writes each
   * window's `answer` into `into` from `at`, over the answer objects already there if any. With `shedding`, the random number of a decision
   * that was shed, a window that shed it answers `shedRetryAt` as its `fitsAtMs`. Leaves in
   * `settled` the state after and its `expiresAt`, reckoned as each window's values go by rather
   * than in a pass of their own.
   */
  settle(
    state: S | undefined,
    windows: readonly Window[],
    now: number,
    cost: number,
    delta: -1 | 0 | 1,
    shedding: number | undefined,
    into: StoreWindowResult[],
    at: number,
    settled: Settled<S>,
  ): void
}

/** What `settle` leaves: the state after (undefined: none is left) and when it may be dropped (0 with no state). */
export interface Settled<S = unknown> {
  state: S | undefined
  expiresAt: number
}
