import type { Window } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'
import { clampIndices, type PeriodState, store, valuesOf } from './period-state.js'
import { ceilRatio, largestWithin } from './ratios.js'

/** Per period: the current fixed window's index, its count, and the previous window's count. */
export type SlidingWindowState = PeriodState

function current(state: SlidingWindowState | undefined, window: Window, now: number): [number, number, number] {
  const index = Math.floor(now / window.periodMs)
  const at = valuesOf(state, window.periodMs, 3)
  if (at < 0) return [index, 0, 0]
  const values = state as PeriodState
  const storedIndex = values[at] as number
  if (storedIndex >= index) return [storedIndex, values[at + 1] as number, values[at + 2] as number]
  if (storedIndex === index - 1) return [index, 0, values[at + 1] as number]
  return [index, 0, 0]
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
  const [index, count, previous] = current(state, window, now)
  return count + ceilRatio(previous, overlap(window, index, now), window.periodMs)
}

export const slidingWindow: Algorithm<SlidingWindowState> = {
  fitsAt(state, window, now, need) {
    const { limit, periodMs } = window
    if (need > limit) return NEVER
    const [index, count, previous] = current(state, window, now)
    const room = limit - need - count
    if (room >= 0) {
      if (ceilRatio(previous, overlap(window, index, now), periodMs) <= room) return now
      return Math.max(now, (index + 1) * periodMs - largestWithin(previous, room, periodMs))
    }
    // Only once this window has become the previous one can its count decay enough.
    return (index + 2) * periodMs - largestWithin(count, limit - need, periodMs)
  },

  remaining(state, window, now) {
    return Math.max(0, window.limit - used(state, window, now))
  },

  used,

  stepsPerUnit() {
    return 1
  },

  charge(state, windows, now, cost) {
    const next: SlidingWindowState = state ?? []
    for (const window of windows) {
      const [index, count, previous] = current(next, window, now)
      store(next, window.periodMs, [index, count + cost, previous])
    }
    return next
  },

  // Each window gives back what it still counts of the units: from the current count first,
  // then from the previous one, which holds the charge once the window has rolled over.
  refund(state, windows, now, cost) {
    if (!state) return undefined
    for (const window of windows) {
      const [index, count, previous] = current(state, window, now)
      const fromCurrent = Math.min(count, cost)
      store(state, window.periodMs, [index, count - fromCurrent, Math.max(0, previous - (cost - fromCurrent))])
    }
    return state
  },

  clamp(state, windows, now) {
    return clampIndices(state, windows, now, 3)
  },

  expiresAt(state, windows) {
    let latest = 0
    for (const window of windows) {
      const at = valuesOf(state, window.periodMs, 3)
      if (at < 0) continue
      const [index, count, previous] = [state[at] as number, state[at + 1] as number, state[at + 2] as number]
      if (count > 0 || previous > 0) {
        // The current count still weighs on the next window, as its previous one.
        latest = Math.max(latest, (index + (count > 0 ? 2 : 1)) * window.periodMs)
      }
    }
    return latest
  },
}
