import type { Window } from '../rules.js'
import { gcd } from '../rules.js'
import { type Algorithm, NEVER } from './algorithm.js'
import { type PeriodState, store, valuesOf } from './period-state.js'

/**
 * Per period: the bucket's level and the time it was measured. The level is kept in units of
 * 1/(period / g) token, g = gcd(limit, period), so that refilling `limit` tokens per `period` adds
 * a whole number (`limit / g`) each millisecond and every comparison is exact integer arithmetic.
 * When that capacity, `limit × period / g`, would pass 2^53 − 1 (where doubles round), a token
 * is instead `floor((2^53 − 1) / limit)` units, and a millisecond refills the whole number of
 * units just above its exact share, `ceil(capacity / period)`: the bucket still holds exactly
 * `limit` tokens, and refills less than 2 × period / (2^53 − 1) (7.03 ppm at 366 days) faster
 * than `limit` per `period`, never slower, so it is full again within the period.
 */
export type BucketState = PeriodState

interface Scale {
  perToken: number
  perMs: number
  capacity: number
}

const scales = new WeakMap<Window, Scale>()

export function scaleOf(window: Window): Scale {
  let scale = scales.get(window)
  if (!scale) {
    const { limit, periodMs } = window
    const g = gcd(limit, periodMs)
    const exact = (limit / g) * periodMs
    if (exact <= Number.MAX_SAFE_INTEGER) {
      scale = { perToken: periodMs / g, perMs: limit / g, capacity: exact }
    } else {
      const perToken = Math.floor(Number.MAX_SAFE_INTEGER / limit)
      const capacity = limit * perToken
      scale = { perToken, perMs: Math.ceil(capacity / periodMs), capacity }
    }
    scales.set(window, scale)
  }
  return scale
}

/** The level at `now`; a measurement stamped later than `now` was moved back to it by `clamp`. */
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
    // A level below 0 is units a HybridStore's fleet owes (stores/redis-state.ts): none remain.
    return Math.max(0, Math.floor(current(state, window, now)[0] / scaleOf(window).perToken))
  },

  used(state, window, now) {
    return scaleOf(window).capacity - current(state, window, now)[0]
  },

  stepsPerUnit(window) {
    return scaleOf(window).perToken
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

  clamp(state, windows, now) {
    let moved = false
    for (const window of windows) {
      const offset = valuesOf(state, window.periodMs, 2)
      if (offset >= 0 && ((state as PeriodState)[offset + 1] as number) > now) {
        ;(state as PeriodState)[offset + 1] = now
        moved = true
      }
    }
    return moved
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
