import type { Window } from '../rules/rules.js'
import { type Algorithm, CLAMPED, LIMITED, NEVER, SHEDS } from './algorithm.js'
import { clampIndices, type PeriodState, valuesOf, withValues } from './period-state.js'
import { ceilRatio, largestWithin } from './ratios.js'
import { answerShed, shedsAt } from './shedding.js'
import { answerAt, emptyAnswer, type StoreWindowResult } from './window-result.js'

/** Per period: the current fixed window's index, its count, and the previous window's count. */
export type SlidingWindowState = PeriodState

/** When a window's stored values stop counting, 0 when they count nothing. */
function windowExpiry(index: number, count: number, previous: number, periodMs: number): number {
  // The current count still weighs on the next window, as its previous one.
  if (count > 0) return (index + 2) * periodMs
  return previous > 0 ? (index + 1) * periodMs : 0
}

/*
 * Now's fixed window, read from the values at `at` (valuesOf, -1 for none): its index, its count
 * and the previous window's count. Three reads rather than one tuple: reading allocates nothing.
 */

function indexAt(values: SlidingWindowState | undefined, at: number, periodMs: number, now: number): number {
  const index = Math.floor(now / periodMs)
  return at >= 0 ? Math.max(index, (values as PeriodState)[at] as number) : index
}

function countAt(values: SlidingWindowState | undefined, at: number, periodMs: number, now: number): number {
  return at >= 0 && ((values as PeriodState)[at] as number) >= Math.floor(now / periodMs)
    ? ((values as PeriodState)[at + 1] as number)
    : 0
}

function previousAt(values: SlidingWindowState | undefined, at: number, periodMs: number, now: number): number {
  if (at < 0) return 0
  const stored = (values as PeriodState)[at] as number
  const index = Math.floor(now / periodMs)
  if (stored >= index) return (values as PeriodState)[at + 2] as number
  return stored === index - 1 ? ((values as PeriodState)[at + 1] as number) : 0
}

/**
 * How much of the previous window the sliding window still covers, in ms. The estimate is
 * `previous × overlap / period + current`; every comparison weighs the previous count as the
 * whole units `ceil(previous × overlap / period)`, computed exactly (ratios.ts) for any limit
 * below 2^53 and period up to 366 days, so Lua and JavaScript agree to the unit and the millisecond.
 */
function overlap(window: Window, index: number, now: number): number {
  return window.periodMs - Math.max(0, now - index * window.periodMs)
}

/** The estimate: the current count and the previous one's weight, in whole units. */
function used(state: SlidingWindowState | undefined, window: Window, now: number): number {
  const { periodMs } = window
  const at = valuesOf(state, periodMs, 3)
  const index = indexAt(state, at, periodMs, now)
  return (
    countAt(state, at, periodMs, now) +
    ceilRatio(previousAt(state, at, periodMs, now), overlap(window, index, now), periodMs)
  )
}

/** When `need` more units fit in the window whose current fixed window is `index`, holding `count` and `previous`. */
function fits(window: Window, now: number, need: number, index: number, count: number, previous: number): number {
  const { limit, periodMs } = window
  if (need > limit) return NEVER
  const room = limit - need - count
  if (room >= 0) {
    if (ceilRatio(previous, overlap(window, index, now), periodMs) <= room) return now
    return Math.max(now, (index + 1) * periodMs - largestWithin(previous, room, periodMs))
  }
  // Only once this window has become the previous one can its count decay enough.
  return (index + 2) * periodMs - largestWithin(count, limit - need, periodMs)
}

function fitsAt(state: SlidingWindowState | undefined, window: Window, now: number, need: number): number {
  const { periodMs } = window
  const at = valuesOf(state, periodMs, 3)
  return fits(
    window,
    now,
    need,
    indexAt(state, at, periodMs, now),
    countAt(state, at, periodMs, now),
    previousAt(state, at, periodMs, now),
  )
}

/** The answer of a window whose fixed window `index` holds `count`, beside `previous` in the one before. */
function answerWith(
  window: Window,
  now: number,
  cost: number,
  index: number,
  count: number,
  previous: number,
  into: StoreWindowResult,
): StoreWindowResult {
  const { limit, periodMs } = window
  const remaining = Math.max(0, limit - count - ceilRatio(previous, overlap(window, index, now), periodMs))
  into.remaining = remaining
  into.resetAtMs = remaining >= limit ? now : fits(window, now, remaining + 1, index, count, previous)
  into.fitsAtMs = fits(window, now, cost, index, count, previous)
  return into
}

function answer(
  state: SlidingWindowState | undefined,
  window: Window,
  now: number,
  cost: number,
  into: StoreWindowResult = emptyAnswer(),
): StoreWindowResult {
  const { periodMs } = window
  const at = valuesOf(state, periodMs, 3)
  return answerWith(
    window,
    now,
    cost,
    indexAt(state, at, periodMs, now),
    countAt(state, at, periodMs, now),
    previousAt(state, at, periodMs, now),
    into,
  )
}

function charge(
  state: SlidingWindowState | undefined,
  windows: readonly Window[],
  now: number,
  cost: number,
): SlidingWindowState {
  let next = state
  for (const { periodMs } of windows) {
    const at = valuesOf(next, periodMs, 3)
    const index = indexAt(next, at, periodMs, now)
    const count = countAt(next, at, periodMs, now)
    next = withValues(next, at, periodMs, index, count + cost, previousAt(next, at, periodMs, now))
  }
  return next as SlidingWindowState
}

// Each window gives back what it still counts of the units: from the current count first,
// then from the previous one, which holds the charge once the window has rolled over.
function refund(
  state: SlidingWindowState | undefined,
  windows: readonly Window[],
  now: number,
  cost: number,
): SlidingWindowState | undefined {
  if (!state) return undefined
  let next = state
  for (const { periodMs } of windows) {
    const at = valuesOf(next, periodMs, 3)
    const index = indexAt(next, at, periodMs, now)
    const count = countAt(next, at, periodMs, now)
    const previous = previousAt(next, at, periodMs, now)
    const fromCurrent = Math.min(count, cost)
    next = withValues(next, at, periodMs, index, count - fromCurrent, Math.max(0, previous - (cost - fromCurrent)))
  }
  return next
}

export const slidingWindow: Algorithm<SlidingWindowState> = {
  fitsAt,

  remaining(state, window, now) {
    return Math.max(0, window.limit - used(state, window, now))
  },

  used,

  stepsPerUnit() {
    return 1
  },

  answer,

  charge,

  refund,

  expiresAt(state, windows) {
    let latest = 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      const at = valuesOf(state, window.periodMs, 3)
      if (at < 0) continue
      latest = Math.max(
        latest,
        windowExpiry(state[at] as number, state[at + 1] as number, state[at + 2] as number, window.periodMs),
      )
    }
    return latest
  },

  read(state, windows, now, cost, random) {
    let bits = clampIndices(state, windows, now, 3) ? CLAMPED : 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      if (fitsAt(state, window, now, cost) !== now) return bits | LIMITED
      if (
        random !== undefined &&
        window.lowBurst !== undefined &&
        shedsAt(window, used(state, window, now), 1, cost, random)
      )
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
      const offset = valuesOf(next, periodMs, 3)
      const index = indexAt(next, offset, periodMs, now)
      let count = countAt(next, offset, periodMs, now)
      const previous = previousAt(next, offset, periodMs, now)
      if (delta > 0) {
        count += cost
        next = withValues(next, offset, periodMs, index, count, previous)
        expiresAt = Math.max(expiresAt, windowExpiry(index, count, previous, periodMs))
      } else if (offset >= 0) {
        const values = next as PeriodState
        expiresAt = Math.max(
          expiresAt,
          windowExpiry(values[offset] as number, values[offset + 1] as number, values[offset + 2] as number, periodMs),
        )
      }
      // An answer already in `into` is written over: a store that reuses its answers allocates none.
      const result = answerWith(window, now, cost, index, count, previous, answerAt(into, at))
      if (shedding !== undefined && window.lowBurst !== undefined)
        answerShed(slidingWindow, next, window, now, cost, shedding, result)
      at++
    }
    settled.state = next
    settled.expiresAt = next === undefined ? 0 : expiresAt
  },
}
