import type { Window } from '../rules/rules.js'
import type { Algorithm } from './algorithm.js'
import type { StoreWindowResult } from './window-result.js'

/**
 * Probabilistic shedding between a window's `lowBurst` and its limit. A request that fits,
 * leaving the window's use at u units after its cost, is dropped with probability
 * p = (u − lowBurst) / (limit − lowBurst) when u > lowBurst: with the decision's random number r
 * in [0, 1), when r < p. That is compared as r × (limit − lowBurst) < u − lowBurst, both sides in
 * the algorithm's steps (a bucket's fill is fractional): every operand but r's product is then
 * an exact integer below 2^53, the product is one IEEE rounding, and lua/lib/shedding.lua,
 * given the same r, drops exactly the same requests.
 */
export function sheds<S>(
  algorithm: Algorithm<S>,
  state: S | undefined,
  window: Window,
  now: number,
  cost: number,
  random: number,
): boolean {
  if (window.lowBurst === undefined) return false
  return shedsAt(window, algorithm.used(state, window, now), algorithm.stepsPerUnit(window), cost, random)
}

/** `sheds` for a window with `lowBurst` whose use is `used` steps, `steps` to a unit. */
export function shedsAt(window: Window, used: number, steps: number, cost: number, random: number): boolean {
  const { limit, lowBurst = limit } = window
  // The request fits, so the use before it plus its cost is at most the limit: no sum passes 2^53.
  return random * ((limit - lowBurst) * steps) < used + (cost - lowBurst) * steps
}

/**
 * When a window that shed a request would no longer shed it at all: once its use after the cost
 * is at most `lowBurst`, i.e. once `cost + limit − lowBurst` fits (the limit, for a cost above
 * `lowBurst`, which always risks being shed), and at least a millisecond on, so that a client
 * told to wait does wait.
 */
export function shedRetryAt<S>(
  algorithm: Algorithm<S>,
  state: S | undefined,
  window: Window,
  now: number,
  cost: number,
): number {
  const { limit, lowBurst = limit } = window
  return Math.max(now + 1, algorithm.fitsAt(state, window, now, Math.min(limit, cost + limit - lowBurst)))
}

/**
 * For a decision that was shed: `answer`'s `fitsAtMs` becomes `shedRetryAt` if this window shed
 * it. A rare path, so one function for every algorithm.
 */
export function answerShed<S>(
  algorithm: Algorithm<S>,
  state: S | undefined,
  window: Window,
  now: number,
  cost: number,
  random: number,
  answer: StoreWindowResult,
): void {
  if (sheds(algorithm, state, window, now, cost, random))
    answer.fitsAtMs = shedRetryAt(algorithm, state, window, now, cost)
}
