import type { Window } from '../rules.js'
import { gcd } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'
import { type PeriodState, store, valuesOf } from './period-state.js'

/**
 * Per period: the bucket's level and the time it was measured. The level is kept in units of
 * 1/(period / g) token, g = gcd(limit, period), so that refilling `limit` tokens per `period` adds
 * a whole number (`limit / g`) each millisecond and every comparison is exact integer arithmetic.
 */
export type BucketState = PeriodState

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
  const offset = valuesOf(state, window.periodMs, 2)
  if (offset < 0) return [capacity, now]
  const level = (state as PeriodState)[offset] as number
  const measured = (state as PeriodState)[offset + 1] as number
  const at = Math.max(now, measured)
  return [Math.min(capacity, level + (at - measured) * perMs), at]
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
    const next: BucketState = state ?? []
    for (const window of windows) {
      const [level, at] = current(next, window, now)
      store(next, window.periodMs, [level - cost * scaleOf(window).perToken, at])
    }
    return next
  },

  refund(state, windows, now, cost) {
    if (!state) return undefined
    for (const window of windows) {
      const { perToken, capacity } = scaleOf(window)
      const [level, at] = current(state, window, now)
      store(state, window.periodMs, [Math.min(capacity, level + cost * perToken), at])
    }
    return state
  },

  expiresAt(state, windows) {
    let latest = 0
    for (const window of windows) {
      const offset = valuesOf(state, window.periodMs, 2)
      if (offset < 0) continue
      const { perMs, capacity } = scaleOf(window)
      latest = Math.max(
        latest,
        (state[offset + 1] as number) + Math.ceil((capacity - (state[offset] as number)) / perMs),
      )
    }
    return latest
  },
}
