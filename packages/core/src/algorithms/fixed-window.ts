import type { Window } from '../rules/rules.js'
import { type Algorithm, CLAMPED, LIMITED, NEVER, SHEDS } from './algorithm.js'
import { type PeriodState, valuesOf, withValues } from './period-state.js'
import { answerShed, shedsAt } from './shedding.js'
import { answerAt, emptyAnswer, type StoreWindowResult } from './window-result.js'

/** Per period: the index of the window (`floor(now / period)`) and the units counted in it. */
export type FixedWindowState = PeriodState

/**
 * Whether the values at `at` (valuesOf) count for now's window: a window ahead of ours was moved
 * back to ours by `clamp`, and its count stays counted, for one period at most.
 */
function counts(state: FixedWindowState | undefined, at: number, periodMs: number, now: number): boolean {
  return at >= 0 && ((state as PeriodState)[at] as number) >= Math.floor(now / periodMs)
}

/** When `need` more units fit beside `count`, the units counted in the window ending at `endsAt`. */
function fits(window: Window, now: number, need: number, count: number, endsAt: number): number {
  if (need > window.limit) return NEVER
  return count + need <= window.limit ? now : endsAt
}

/** When a window's stored values stop counting: the end of window `index` while it counts something, else 0. */
function windowExpiry(index: number, count: number, periodMs: number): number {
  return count > 0 ? (index + 1) * periodMs : 0
}

/** The units counted in now's window. */
function countOf(state: FixedWindowState | undefined, window: Window, now: number): number {
  const at = valuesOf(state, window.periodMs, 2)
  return counts(state, at, window.periodMs, now) ? ((state as PeriodState)[at + 1] as number) : 0
}

/** The answer of a window that counts `count` units in the fixed window ending at `endsAt`. */
function answerWith(
  window: Window,
  now: number,
  cost: number,
  count: number,
  endsAt: number,
  into: StoreWindowResult,
): StoreWindowResult {
  const { limit } = window
  const remaining = Math.max(0, limit - count)
  into.remaining = remaining
  // Something is counted when less than the limit remains, and one unit more than remains never
  // fits beside it: the window frees one at its end.
  into.resetAtMs = remaining >= limit ? now : endsAt
  into.fitsAtMs = fits(window, now, cost, count, endsAt)
  return into
}

function answer(
  state: FixedWindowState | undefined,
  window: Window,
  now: number,
  cost: number,
  into: StoreWindowResult = emptyAnswer(),
): StoreWindowResult {
  const { periodMs } = window
  const at = valuesOf(state, periodMs, 2)
  const counting = counts(state, at, periodMs, now)
  const values = state as PeriodState
  const count = counting ? (values[at + 1] as number) : 0
  const endsAt = counting ? ((values[at] as number) + 1) * periodMs : now
  return answerWith(window, now, cost, count, endsAt, into)
}

function charge(state: FixedWindowState | undefined, windows: readonly Window[], now: number, cost: number) {
  let next = state
  for (const { periodMs } of windows) {
    const at = valuesOf(next, periodMs, 2)
    const values = next as PeriodState
    next = counts(next, at, periodMs, now)
      ? withValues(next, at, periodMs, values[at] as number, (values[at + 1] as number) + cost)
      : withValues(next, at, periodMs, Math.floor(now / periodMs), cost)
  }
  return next as FixedWindowState
}

function refund(state: FixedWindowState | undefined, windows: readonly Window[], now: number, cost: number) {
  if (!state) return undefined
  let next = state
  for (const { periodMs } of windows) {
    const at = valuesOf(next, periodMs, 2)
    next = counts(next, at, periodMs, now)
      ? withValues(next, at, periodMs, next[at] as number, Math.max(0, (next[at + 1] as number) - cost))
      : withValues(next, at, periodMs, Math.floor(now / periodMs), 0)
  }
  return next
}

export const fixedWindow: Algorithm<FixedWindowState> = {
  fitsAt(state, window, now, need) {
    const at = valuesOf(state, window.periodMs, 2)
    if (!counts(state, at, window.periodMs, now)) return fits(window, now, need, 0, now)
    const values = state as PeriodState
    return fits(window, now, need, values[at + 1] as number, ((values[at] as number) + 1) * window.periodMs)
  },

  answer,

  remaining(state, window, now) {
    return Math.max(0, window.limit - countOf(state, window, now))
  },

  used(state, window, now) {
    return countOf(state, window, now)
  },

  stepsPerUnit() {
    return 1
  },

  charge,

  refund,

  expiresAt(state, windows) {
    let latest = 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      const at = valuesOf(state, window.periodMs, 2)
      if (at >= 0)
        latest = Math.max(latest, windowExpiry(state[at] as number, state[at + 1] as number, window.periodMs))
    }
    return latest
  },
  read(state, windows, now, cost, random) {
    let bits = 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      const { limit, periodMs } = window
      const at = valuesOf(state, periodMs, 2)
      const index = Math.floor(now / periodMs)
      let count = 0
      if (at >= 0) {
        const values = state as PeriodState
        const stored = values[at] as number
        // clamp: a window a faster clock stamped ahead is now's, its count kept.
        if (stored > index) {
          values[at] = index
          bits |= CLAMPED
        }
        if (stored >= index) count = values[at + 1] as number
      }
      if (cost > limit || count + cost > limit) bits |= LIMITED
      else if (random !== undefined && window.lowBurst !== undefined && shedsAt(window, count, 1, cost, random))
        bits |= SHEDS
    }
    return bits
  },

  settle(state, windows, now, cost, delta, shedding, into, at, settled) {
    // A refund takes its own steps; a charge, or nothing, is made and answered window by window,
    // each window's values found once.
    let next = delta < 0 ? refund(state, windows, now, cost) : state
    let expiresAt = 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      const { periodMs } = window
      const current = Math.floor(now / periodMs)
      const offset = valuesOf(next, periodMs, 2)
      const stored = offset >= 0 ? ((next as PeriodState)[offset] as number) : -1
      const kept = offset >= 0 ? ((next as PeriodState)[offset + 1] as number) : 0
      const counting = stored >= current
      const index = counting ? stored : current
      let count = counting ? kept : 0
      if (delta > 0) {
        count += cost
        next = withValues(next, offset, periodMs, index, count)
        expiresAt = Math.max(expiresAt, windowExpiry(index, count, periodMs))
      } else expiresAt = Math.max(expiresAt, windowExpiry(stored, kept, periodMs))
      const endsAt = counting || delta > 0 ? (index + 1) * periodMs : now
      // An answer already in `into` is written over: a store that reuses its answers allocates none.
      const result = answerWith(window, now, cost, count, endsAt, answerAt(into, at))
      if (shedding !== undefined && window.lowBurst !== undefined)
        answerShed(fixedWindow, next, window, now, cost, shedding, result)
      at++
    }
    settled.state = next
    settled.expiresAt = next === undefined ? 0 : expiresAt
  },
}
