import type { Window } from '../rules/rules.js'
import { type Algorithm, CLAMPED, LIMITED, NEVER, SHEDS } from './algorithm.js'
import { answerShed, shedsAt } from './shedding.js'
import { answerAt, emptyAnswer, type StoreWindowResult } from './window-result.js'

/**
 * Every admitted request as (time, running total of units after it). The running total makes a
 * window's usage one subtraction, `total − total before the window`, whatever the costs, so a
 * byte quota costs one entry per request, not one per byte. Entries that left the longest window
 * are dropped and their total is kept as `base`. A total that would pass 2^53 − 1, where doubles
 * round, is rebased first: `base` is taken off every total, which keeps each difference, so the
 * newest total is again at most what the longest window holds (its limit, below 2^53).
 */
export interface SlidingLogState {
  times: number[]
  totals: number[]
  /** The running total before the first entry still kept (`start`). */
  base: number
  /**
   * Where the entries still kept begin: those before it were dropped. A log at its limit drops
   * an entry for each it adds; taking each off the front of the arrays would move every other
   * entry, so a charge would cost as much as the log is long. They are cut off in one go
   * instead, once they make up half the arrays.
   */
  start: number
}

function longestPeriod(windows: readonly Window[]): number {
  let longest = 0
  for (const window of windows) longest = Math.max(longest, window.periodMs)
  return longest
}

/** Index of the last entry kept at or before `time`, or `start − 1` when there is none. */
function lastAtOrBefore(state: SlidingLogState, time: number): number {
  const { times, start } = state
  // Charges drop what leaves the longest window, so most logs hold nothing older than it, as
  // the Lua finds out first too: then no search is needed.
  if (start >= times.length || (times[start] as number) > time) return start - 1
  let low = start
  let high = times.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if ((times[mid] as number) <= time) low = mid + 1
    else high = mid
  }
  return low - 1
}

function totalAt(state: SlidingLogState, index: number): number {
  return index < state.start ? state.base : (state.totals[index] as number)
}

/** The running total before the window: what the window holds is the last total less it. */
function totalBefore(state: SlidingLogState, window: Window, now: number): number {
  return totalAt(state, lastAtOrBefore(state, now - window.periodMs))
}

function lastTotal(state: SlidingLogState): number {
  return totalAt(state, state.totals.length - 1)
}

/** When `need` more units fit in the window, whose running total before it is `before`. */
function fits(state: SlidingLogState | undefined, window: Window, now: number, need: number, before: number): number {
  if (need > window.limit) return NEVER
  if (!state) return now
  const inWindow = lastTotal(state) - before
  if (inWindow + need <= window.limit) return now
  // The request fits once enough of the oldest units have left the window.
  // The last total less the room the request lacks: no sum passes the last total, below 2^53.
  const target = before + inWindow - (window.limit - need)
  let low = state.start
  let high = state.totals.length - 1
  while (low < high) {
    const mid = (low + high) >>> 1
    if ((state.totals[mid] as number) >= target) high = mid
    else low = mid + 1
  }
  return (state.times[low] as number) + window.periodMs
}

function fitsAt(state: SlidingLogState | undefined, window: Window, now: number, need: number): number {
  return fits(state, window, now, need, state ? totalBefore(state, window, now) : 0)
}

function answer(
  state: SlidingLogState | undefined,
  window: Window,
  now: number,
  cost: number,
  into: StoreWindowResult = emptyAnswer(),
): StoreWindowResult {
  const { limit } = window
  const before = state ? totalBefore(state, window, now) : 0
  const remaining = state ? Math.max(0, limit - (lastTotal(state) - before)) : limit
  into.remaining = remaining
  into.resetAtMs = remaining >= limit ? now : fits(state, window, now, remaining + 1, before)
  into.fitsAtMs = fits(state, window, now, cost, before)
  return into
}

function used(state: SlidingLogState | undefined, window: Window, now: number): number {
  return state ? lastTotal(state) - totalBefore(state, window, now) : 0
}

function charge(
  state: SlidingLogState | undefined,
  windows: readonly Window[],
  now: number,
  cost: number,
): SlidingLogState {
  const cutoff = now - longestPeriod(windows)
  const log = state ?? { times: [], totals: [], base: 0, start: 0 }
  const last = log.times.length - 1
  if (last < log.start || (log.times[last] as number) <= cutoff) {
    // Nothing left in any window: start the running total afresh.
    log.times = []
    log.totals = []
    log.base = 0
    log.start = 0
  } else {
    const kept = lastAtOrBefore(log, cutoff) + 1
    if (kept > log.start) {
      log.base = log.totals[kept - 1] as number
      log.start = kept
    }
    if (log.start * 2 >= log.times.length) {
      log.times.splice(0, log.start)
      log.totals.splice(0, log.start)
      log.start = 0
    }
  }
  const n = log.times.length
  if (totalAt(log, n - 1) + cost > Number.MAX_SAFE_INTEGER) {
    for (let i = log.start; i < n; i++) log.totals[i] = (log.totals[i] as number) - log.base
    log.base = 0
  }
  // `clamp` left no entry after now, so entries stay in time order.
  log.times.push(now)
  log.totals.push(totalAt(log, n - 1) + cost)
  return log
}

function refund(
  state: SlidingLogState | undefined,
  windows: readonly Window[],
  now: number,
  cost: number,
): SlidingLogState | undefined {
  if (!state) return undefined
  const cutoff = now - longestPeriod(windows)
  let left = cost
  while (left > 0 && state.times.length > state.start && (state.times[state.times.length - 1] as number) > cutoff) {
    const last = state.times.length - 1
    const units = (state.totals[last] as number) - totalAt(state, last - 1)
    if (units <= left) {
      state.times.pop()
      state.totals.pop()
      left -= units
    } else {
      state.totals[last] = (state.totals[last] as number) - left
      left = 0
    }
  }
  return state
}

/** Moves every entry a faster clock stamped after `now` back to now; whether any moved. */
function clamp(state: SlidingLogState | undefined, now: number): boolean {
  if (!state) return false
  let moved = false
  for (let i = state.times.length - 1; i >= state.start && (state.times[i] as number) > now; i--) {
    state.times[i] = now
    moved = true
  }
  return moved
}

export const slidingLog: Algorithm<SlidingLogState> = {
  fitsAt,

  answer,

  remaining(state, window, now) {
    return state ? Math.max(0, window.limit - (lastTotal(state) - totalBefore(state, window, now))) : window.limit
  },

  used,

  stepsPerUnit() {
    return 1
  },

  charge,

  refund,

  expiresAt(state, windows) {
    const n = state.times.length
    return n === state.start ? 0 : (state.times[n - 1] as number) + longestPeriod(windows)
  },

  read(state, windows, now, cost, random) {
    let bits = clamp(state, now) ? CLAMPED : 0
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
    const next = delta > 0 ? charge(state, windows, now, cost) : delta < 0 ? refund(state, windows, now, cost) : state
    for (let w = 0; w < windows.length; w++) {
      const window = windows[w] as Window
      // An answer already in `into` is written over: a store that reuses its answers allocates none.
      const result = answer(next, window, now, cost, answerAt(into, at))
      if (shedding !== undefined && window.lowBurst !== undefined)
        answerShed(slidingLog, next, window, now, cost, shedding, result)
      at++
    }
    settled.state = next
    settled.expiresAt = next === undefined ? 0 : slidingLog.expiresAt(next, windows)
  },
}
