import type { Window } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'
import { type PeriodState, store, valuesOf } from './period-state.js'

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
 * The estimate is `previous × (period − elapsed) / period + current`. Every comparison is
 * multiplied through by the period so that it runs on integers (exact below 2^53, which rule
 * validation guarantees) and Lua and JavaScript agree to the millisecond.
 */
function overlap(window: Window, index: number, now: number): number {
  return window.periodMs - Math.max(0, now - index * window.periodMs)
}

export const slidingWindow: Algorithm<SlidingWindowState> = {
  fitsAt(state, window, now, need) {
    const { limit, periodMs } = window
    if (need > limit) return NEVER
    const [index, count, previous] = current(state, window, now)
    const room = (limit - need - count) * periodMs
    if (room >= 0) {
      if (previous * overlap(window, index, now) <= room) return now
      return Math.max(now, (index + 1) * periodMs - Math.floor(room / previous))
    }
    // Only once this window has become the previous one can its count decay enough.
    return (index + 2) * periodMs - Math.floor(((limit - need) * periodMs) / count)
  },

  remaining(state, window, now) {
    const { limit, periodMs } = window
    const [index, count, previous] = current(state, window, now)
    const free = limit * periodMs - count * periodMs - previous * overlap(window, index, now)
    return Math.max(0, Math.floor(free / periodMs))
  },

  charge(state, windows, now, cost) {
    const next: SlidingWindowState = state ?? []
    for (const window of windows) {
      const [index, count, previous] = current(next, window, now)
      store(next, window.periodMs, [index, count + cost, previous])
    }
    return next
  },

  refund(state, windows, now, cost) {
    if (!state) return undefined
    for (const window of windows) {
      const [index, count, previous] = current(state, window, now)
      store(state, window.periodMs, [index, Math.max(0, count - cost), previous])
    }
    return state
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
