import type { Window } from '../rules.js'
import { gcd } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'

/**
 * Per period: the bucket's level and the time it was measured. The level is kept in units of
 * 1/(period / g) token, g = gcd(limit, period), so that refilling `limit` tokens per `period` adds
 * a whole number (`limit / g`) each millisecond and every comparison is exact integer arithmetic.
 */
export type BucketState = Map<number, [level: number, at: number]>

interface Scale {
  perToken: number
  perMs: number
  capacity: number
}

const scales = new WeakMap<Window, Scale>()

function scaleOf(window: Window): Scale {
  let scale = scales.get(window)
  if (!scale) {
    const g = gcd(window.limit, window.periodMs)
    const perToken = window.periodMs / g
    scale = { perToken, perMs: window.limit / g, capacity: window.limit * perToken }
    scales.set(window, scale)
  }
  return scale
}

/** A measurement from a faster clock is not refilled backwards: time starts from the later of the two. */
function current(state: BucketState | undefined, window: Window, now: number): [number, number] {
  const { perMs, capacity } = scaleOf(window)
  const stored = state?.get(window.periodMs)
  if (!stored) return [capacity, now]
  const at = Math.max(now, stored[1])
  return [Math.min(capacity, stored[0] + (at - stored[1]) * perMs), at]
}

/**
 * The continuous bucket behind both `token-bucket` and `gcra`: GCRA's theoretical arrival time
 * is `at + (capacity − level) / perMs`, so the two admit exactly the same requests.
 */
export const bucket: Algorithm<BucketState> = {
  fitsAt(state, window, now, need) {
    if (need > window.limit) return NEVER
    const { perToken, perMs } = scaleOf(window)
    const [level, at] = current(state, window, now)
    const deficit = need * perToken - level
    return deficit <= 0 ? now : at + Math.ceil(deficit / perMs)
  },

  remaining(state, window, now) {
    return Math.floor(current(state, window, now)[0] / scaleOf(window).perToken)
  },

  charge(state, windows, now, cost) {
    const next: BucketState = state ?? new Map()
    for (const window of windows) {
      const [level, at] = current(state, window, now)
      next.set(window.periodMs, [level - cost * scaleOf(window).perToken, at])
    }
    return next
  },

  refund(state, windows, now, cost) {
    if (!state) return undefined
    for (const window of windows) {
      const { perToken, capacity } = scaleOf(window)
      const [level, at] = current(state, window, now)
      state.set(window.periodMs, [Math.min(capacity, level + cost * perToken), at])
    }
    return state
  },

  expiresAt(state, windows) {
    let latest = 0
    for (const window of windows) {
      const stored = state.get(window.periodMs)
      if (!stored) continue
      const { perMs, capacity } = scaleOf(window)
      latest = Math.max(latest, stored[1] + Math.ceil((capacity - stored[0]) / perMs))
    }
    return latest
  },
}
