import type { Window } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'

/** Per period: the index of the window (`floor(now / period)`) and the units counted in it. */
export type FixedWindowState = Map<number, [index: number, count: number]>

/** A state written by a faster clock (index ahead of ours) is kept rather than reset, so skewed clocks cannot reopen a window. */
function current(state: FixedWindowState | undefined, window: Window, now: number): [number, number] {
  const index = Math.floor(now / window.periodMs)
  const stored = state?.get(window.periodMs)
  return stored && stored[0] >= index ? stored : [index, 0]
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

  charge(state, windows, now, cost) {
    const next: FixedWindowState = state ?? new Map()
    for (const window of windows) {
      const [index, count] = current(state, window, now)
      next.set(window.periodMs, [index, count + cost])
    }
    return next
  },

  refund(state, windows, now, cost) {
    if (!state) return undefined
    for (const window of windows) {
      const [index, count] = current(state, window, now)
      state.set(window.periodMs, [index, Math.max(0, count - cost)])
    }
    return state
  },

  expiresAt(state, windows) {
    let latest = 0
    for (const window of windows) {
      const stored = state.get(window.periodMs)
      if (stored && stored[1] > 0) latest = Math.max(latest, (stored[0] + 1) * window.periodMs)
    }
    return latest
  },
}
