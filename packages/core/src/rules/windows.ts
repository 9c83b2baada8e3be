import type { Duration } from '../support/duration.js'
import { parseDuration } from '../support/duration.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, optionKeys } from '../support/option-objects.js'
import type { WarningHandler } from '../support/process-warning.js'

import type { AlgorithmName } from './algorithm-name.js'

export interface WindowOptions {
  /**
   * Units admitted per `period`: requests, or whatever `cost` counts (bytes, tokens…).
   * @example 20
   */
  limit: number
  /**
   * The window's length: milliseconds as a number, or a number and a unit, such as `'500ms'`,
   * `'3s'`, `'1m'`, `'15 minutes'`, `'1h'`, `'1 day'` (see `Duration`). A number is milliseconds
   * here but seconds in a rules file, so a number under 1000 warns (`TG_PERIOD_IN_MS`): write
   * `'500ms'` to mean it.
   * @example '60s'
   */
  period: Duration
  /**
   * Load shedding between `lowBurst` and `limit`: a request that fits, leaving the window's use
   * at u units after its cost, is refused with reason `shed` with probability
   * (u − lowBurst) ÷ (limit − lowBurst) when u > lowBurst, so that a key's admitted rate falls
   * off linearly as it nears the limit instead of stopping dead there. An integer from 0 to
   * `limit` − 1. A shed request charges nothing; its `retryAfterMs` is the time until the window's
   * use after its cost would be back at `lowBurst`. See the README's "Shedding".
   * @default undefined (no shedding: admitted up to the limit)
   * @example { limit: 100, period: '1m', lowBurst: 50 }
   */
  lowBurst?: number
}

export interface Window {
  readonly limit: number
  readonly periodMs: number
  /** Where shedding starts; absent on a window that does not shed. */
  readonly lowBurst?: number
}

/** Bounds that keep one decision a single, small script call. */
export const MAX_WINDOWS_PER_RULE = 8

const WINDOW_KEYS = optionKeys<WindowOptions>({ limit: true, period: true, lowBurst: true })

/**
 * A list of windows as a rule or an override gives it: non-empty, at most MAX_WINDOWS_PER_RULE,
 * each checked, no period twice. `where` names the rule (and the override) in errors.
 */
export function resolveWindows(raw: unknown, where: string, warn: WarningHandler): Window[] {
  if (!Array.isArray(raw) || raw.length === 0) {
    throw new TollgateConfigError(`${where}: windows must be a non-empty array, got ${describeValue(raw)}`)
  }
  if (raw.length > MAX_WINDOWS_PER_RULE) {
    throw new TollgateConfigError(`${where}: ${raw.length} windows is more than the maximum of ${MAX_WINDOWS_PER_RULE}`)
  }
  const windows = raw.map((window, index) => resolveWindow(window, `${where}, window ${index}`, warn))
  const seen = new Map<number, number>()
  windows.forEach((window, index) => {
    const earlier = seen.get(window.periodMs)
    if (earlier !== undefined) {
      throw new TollgateConfigError(
        `${where}, window ${index}: period ${window.periodMs} ms repeats window ${earlier}'s; merge them into one window with the smaller limit`,
      )
    }
    seen.set(window.periodMs, index)
  })
  return windows
}

function resolveWindow(raw: unknown, where: string, warn: WarningHandler): Window {
  const { limit, period, lowBurst } = checkOptionsObject(raw, WINDOW_KEYS, where, { shape: '{ limit, period }' })
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit <= 0) {
    throw new TollgateConfigError(`${where}: limit must be a positive integer, got ${describeValue(limit)}`)
  }
  if (
    lowBurst !== undefined &&
    (typeof lowBurst !== 'number' || !Number.isInteger(lowBurst) || lowBurst < 0 || lowBurst >= limit)
  ) {
    throw new TollgateConfigError(
      `${where}: lowBurst must be an integer from 0 to ${limit - 1} (below the limit, ${limit}), got ${describeValue(lowBurst)}`,
    )
  }
  // Any limit up to 2^53 − 1 with any period up to 366 days: the algorithms keep their
  // products exact or, for the largest buckets, within a stated resolution (see bucket.ts).
  const periodMs = parseDuration(period)
  if (typeof periodMs === 'string') throw new TollgateConfigError(`${where}: period ${periodMs}`)
  if (typeof period === 'number' && periodMs < 1_000) {
    warn(
      `${where}: period ${period} is ${period} milliseconds (in code a number is milliseconds; in a rules file, seconds); write '${period}ms' to mean it, or '${period}s' for seconds`,
      'TG_PERIOD_IN_MS',
    )
  }
  // Only a shedding window carries lowBurst: windows without it keep the shape they always had.
  return lowBurst === undefined ? { limit, periodMs } : { limit, periodMs, lowBurst }
}

/**
 * Warns about a window that provably never refuses anything its neighbour would not:
 * - sliding log: any long period holds at most `short.limit × ceil(long / short)` units, and any
 *   short period lies inside a long one;
 * - fixed windows: the same, but only when the short period divides the long one (otherwise a
 *   short window can straddle two long ones);
 * - buckets: a bucket never empties while its neighbour has room if both its capacity and its
 *   refill rate are at least the neighbour's.
 * The sliding-window counter estimates, so nothing about it is provable this way.
 */
function neverBinds(algorithm: AlgorithmName, short: Window, long: Window): 'short' | 'long' | undefined {
  const ratio = long.periodMs / short.periodMs
  switch (algorithm) {
    case 'sliding-log':
      if (short.limit >= long.limit) return 'short'
      return short.limit * Math.ceil(ratio) <= long.limit ? 'long' : undefined
    case 'fixed-window':
      if (!Number.isInteger(ratio)) return undefined
      if (short.limit >= long.limit) return 'short'
      return short.limit * ratio <= long.limit ? 'long' : undefined
    case 'token-bucket':
    case 'gcra': {
      const shortRate = short.limit * long.periodMs
      const longRate = long.limit * short.periodMs
      if (short.limit >= long.limit && shortRate >= longRate) return 'short'
      return short.limit <= long.limit && shortRate <= longRate ? 'long' : undefined
    }
    default:
      return undefined
  }
}

export function warnOnWindowsThatNeverBind(
  where: string,
  algorithm: AlgorithmName,
  windows: readonly Window[],
  warn: WarningHandler,
): void {
  const sorted = [...windows].sort((a, b) => a.periodMs - b.periodMs)
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const short = sorted[i] as Window
      const long = sorted[j] as Window
      const idle = neverBinds(algorithm, short, long)
      if (idle === undefined) continue
      const [never, beside] = idle === 'short' ? [short, long] : [long, short]
      warn(
        `${where}: window ${never.limit} per ${never.periodMs} ms can never bind beside ${beside.limit} per ${beside.periodMs} ms; ${
          idle === 'short'
            ? 'a shorter window needs a smaller limit'
            : 'limit per period must grow as the period shrinks'
        }`,
        'TG_WINDOW_NEVER_BINDS',
      )
    }
  }
}
