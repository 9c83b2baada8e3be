import type { Window } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'
import { clampIndices, type PeriodState, store, valuesOf } from './period-state.js'

/** Per period: the index of the window (`floor(now / period)`) and the units counted in it. */
export type FixedWindowState = PeriodState

/** A window ahead of ours was moved back to ours by `clamp`: its count stays counted, for one period at most. */
function current(state: FixedWindowState | undefined, window: Window, now: number): [number, number] {
  const index = Math.floor(now / window.periodMs)
  const at = valuesOf(state, window.periodMs, 2)
  return at >= 0 && ((state as PeriodState)[at] as number) >= index
    ? [(state as PeriodState)[at] as number, (state as PeriodState)[at + 1] as number]
    : [index, 0]
}

export const fixedWindow: Algorithm<FixedWindowState> = {
  fitsAt(state, window, now, need) {
    if (need > window.limit) return NEVER
    const [index, count] = current(state, window, now)
    return count + need <= window.limit ? now : (index + 1) * window.periodMs
  },

  remaining(state, window, now) {
    return Math.max(0, window.limit - current(state, window, now)[1])
  },

  used(state, window, now) {
    return current(state, window, now)[1]
  },

  stepsPerUnit() {
    return 1
  },

  charge(state, windows, now, cost) {
    const next: FixedWindowState = state ?? []
    for (const window of windows) {
      const [index, count] = current(next, window, now)
      store(next, window.periodMs, [index, count + cost])
    }
    return next
  },

  refund(state, windows, now, cost) {
    if (!state) return undefined
    for (const window of windows) {
      const [index, count] = current(state, window, now)
      store(state, window.periodMs, [index, Math.max(0, count - cost)])
    }
    return state
  },

  clamp(state, windows, now) {
    return clampIndices(state, windows, now, 2)
  },

  expiresAt(state, windows) {
    let latest = 0
    for (const window of windows) {
      const at = valuesOf(state, window.periodMs, 2)
      if (at >= 0 && (state[at + 1] as number) > 0)
        latest = Math.max(latest, ((state[at] as number) + 1) * window.periodMs)
    }
    return latest
  },
}
