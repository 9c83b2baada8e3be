import type { Window } from '../rules/rules.js'
import { gcd } from '../rules/rules.js'
import { type Algorithm, CLAMPED, LIMITED, NEVER, SHEDS } from './algorithm.js'
import { type PeriodState, valuesOf, withValues } from './period-state.js'
import { answerShed, shedsAt } from './shedding.js'
import { answerAt, emptyAnswer, type StoreWindowResult } from './window-result.js'

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

/**
 * The two windows last asked about, and their scales: a decision asks about each of its windows
 * several times in a row, and a comparison of references costs far less than a WeakMap lookup.
 */
let lastWindow: Window | undefined
let lastScale: Scale | undefined
let otherWindow: Window | undefined
let otherScale: Scale | undefined

export function scaleOf(window: Window): Scale {
  if (window === lastWindow) return lastScale as Scale
  if (window === otherWindow) {
    otherWindow = lastWindow
    lastWindow = window
    const scale = otherScale as Scale
    otherScale = lastScale
    lastScale = scale
    return scale
  }
  otherWindow = lastWindow
  otherScale = lastScale
  lastWindow = window
  lastScale = scaleFor(window)
  return lastScale
}

function scaleFor(window: Window): Scale {
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

/*
 * The level at `now` and the time it is measured at, read from the values at `at` (valuesOf, -1
 * for none): two reads rather than one tuple, so that reading allocates nothing. A measurement
 * stamped later than `now` was moved back to it by `clamp`.
 */

function levelAt(state: BucketState | undefined, at: number, scale: Scale, now: number): number {
  if (at < 0) return scale.capacity
  const level = (state as PeriodState)[at] as number
  const measured = (state as PeriodState)[at + 1] as number
  return Math.min(scale.capacity, level + (Math.max(now, measured) - measured) * scale.perMs)
}

function measuredAt(state: BucketState | undefined, at: number, now: number): number {
  return at < 0 ? now : Math.max(now, (state as PeriodState)[at + 1] as number)
}

/** When a bucket at `level` measured at `measured` is full again, and so holds nothing. */
function fullAt(level: number, measured: number, scale: Scale): number {
  return measured + Math.ceil((scale.capacity - level) / scale.perMs)
}

/** When `need` more units fit in a bucket at `level` measured at `measured`. */
function fits(window: Window, scale: Scale, need: number, level: number, measured: number, now: number): number {
  if (need > window.limit) return NEVER
  const deficit = need * scale.perToken - level
  return deficit <= 0 ? now : measured + Math.ceil(deficit / scale.perMs)
}

function fitsAt(state: BucketState | undefined, window: Window, now: number, need: number): number {
  const scale = scaleOf(window)
  const at = valuesOf(state, window.periodMs, 2)
  return fits(window, scale, need, levelAt(state, at, scale, now), measuredAt(state, at, now), now)
}

function used(state: BucketState | undefined, window: Window, now: number): number {
  const scale = scaleOf(window)
  return scale.capacity - levelAt(state, valuesOf(state, window.periodMs, 2), scale, now)
}

/** The answer of a bucket at `level`, measured at `measured`. */
function answerWith(
  window: Window,
  scale: Scale,
  now: number,
  cost: number,
  level: number,
  measured: number,
  into: StoreWindowResult,
): StoreWindowResult {
  // A level below 0 is units a HybridStore's fleet owes (stores/shared/redis-state.ts): none remain.
  const remaining = Math.max(0, Math.floor(level / scale.perToken))
  into.remaining = remaining
  into.resetAtMs = remaining >= window.limit ? now : fits(window, scale, remaining + 1, level, measured, now)
  into.fitsAtMs = fits(window, scale, cost, level, measured, now)
  return into
}

function answer(
  state: BucketState | undefined,
  window: Window,
  now: number,
  cost: number,
  into: StoreWindowResult = emptyAnswer(),
): StoreWindowResult {
  const scale = scaleOf(window)
  const at = valuesOf(state, window.periodMs, 2)
  return answerWith(window, scale, now, cost, levelAt(state, at, scale, now), measuredAt(state, at, now), into)
}

function charge(state: BucketState | undefined, windows: readonly Window[], now: number, cost: number): BucketState {
  let next = state
  for (const window of windows) {
    const scale = scaleOf(window)
    const at = valuesOf(next, window.periodMs, 2)
    const level = levelAt(next, at, scale, now)
    next = withValues(next, at, window.periodMs, level - cost * scale.perToken, measuredAt(next, at, now))
  }
  return next as BucketState
}

function refund(
  state: BucketState | undefined,
  windows: readonly Window[],
  now: number,
  cost: number,
): BucketState | undefined {
  if (!state) return undefined
  let next = state
  for (const window of windows) {
    const scale = scaleOf(window)
    const at = valuesOf(next, window.periodMs, 2)
    const level = Math.min(scale.capacity, levelAt(next, at, scale, now) + cost * scale.perToken)
    next = withValues(next, at, window.periodMs, level, measuredAt(next, at, now))
  }
  return next
}

function clamp(state: BucketState | undefined, windows: readonly Window[], now: number): boolean {
  let moved = false
  for (const window of windows) {
    const offset = valuesOf(state, window.periodMs, 2)
    if (offset >= 0 && ((state as PeriodState)[offset + 1] as number) > now) {
      ;(state as PeriodState)[offset + 1] = now
      moved = true
    }
  }
  return moved
}

/**
 * The continuous bucket behind both `token-bucket` and `gcra`: GCRA's theoretical arrival time
 * is `at + (capacity − level) / perMs`, so the two admit exactly the same requests.
 */
export const bucket: Algorithm<BucketState> = {
  fitsAt,

  remaining(state, window, now) {
    const scale = scaleOf(window)
    // A level below 0 is units a HybridStore's fleet owes (stores/shared/redis-state.ts): none remain.
    return Math.max(0, Math.floor(levelAt(state, valuesOf(state, window.periodMs, 2), scale, now) / scale.perToken))
  },

  used,

  stepsPerUnit(window) {
    return scaleOf(window).perToken
  },

  answer,

  charge,

  refund,

  expiresAt(state, windows) {
    let latest = 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      const offset = valuesOf(state, window.periodMs, 2)
      if (offset < 0) continue
      latest = Math.max(latest, fullAt(state[offset] as number, state[offset + 1] as number, scaleOf(window)))
    }
    return latest
  },

  read(state, windows, now, cost, random) {
    let bits = clamp(state, windows, now) ? CLAMPED : 0
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      if (fitsAt(state, window, now, cost) !== now) return bits | LIMITED
      if (
        random !== undefined &&
        window.lowBurst !== undefined &&
        shedsAt(window, used(state, window, now), scaleOf(window).perToken, cost, random)
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
      const scale = scaleOf(window)
      const offset = valuesOf(next, window.periodMs, 2)
      let level = levelAt(next, offset, scale, now)
      const measured = measuredAt(next, offset, now)
      if (delta > 0) {
        level -= cost * scale.perToken
        next = withValues(next, offset, window.periodMs, level, measured)
        expiresAt = Math.max(expiresAt, fullAt(level, measured, scale))
      } else if (offset >= 0) {
        const values = next as PeriodState
        expiresAt = Math.max(expiresAt, fullAt(values[offset] as number, values[offset + 1] as number, scale))
      }
      // An answer already in `into` is written over: a store that reuses its answers allocates none.
      const result = answerWith(window, scale, now, cost, level, measured, answerAt(into, at))
      if (shedding !== undefined && window.lowBurst !== undefined)
        answerShed(bucket, next, window, now, cost, shedding, result)
      at++
    }
    settled.state = next
    settled.expiresAt = next === undefined ? 0 : expiresAt
  },
}
