import type { Window } from '../rules.js'
import type { StoreWindowResult } from '../stores/store.js'

/** A time that never comes: the answer of `fitsAt` when a cost exceeds a window's limit. */
export const NEVER = Number.POSITIVE_INFINITY

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
  /**
   * Moves back to `now`, in place, whatever a faster clock stamped later than `now` (another app
   * server's, or this one's before it was set back), so that such state ends within a period of
   * this clock instead of the skew; true when anything moved, and the state must then be written.
   */
  clamp(state: S | undefined, windows: readonly Window[], now: number): boolean
  /** From this time on the state is indistinguishable from no state, so it may be dropped. */
  expiresAt(state: S, windows: readonly Window[]): number
}
