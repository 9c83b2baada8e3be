import { describeValue } from './errors.js'

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const
const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/

/** The longest period a window may have: long enough for any quota, short enough that millisecond timestamps plus a period stay exact doubles. */
export const MAX_PERIOD_MS = 366 * UNIT_MS.d

/**
 * Parses `500` (milliseconds), `'500ms'`, `'3s'`, `'1.5m'`, `'1h'` or `'1d'` into whole milliseconds.
 * Returns an error message instead of throwing so that callers can name where the value came from.
 */
export function parseDuration(value: unknown): number | string {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = DURATION.exec(value)
    if (!match) {
      return `${describeValue(value)} is not a duration: use milliseconds as a number or a string such as '500ms', '3s', '1m', '1h', '1d'`
    }
    const exact = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
    // '4.1m' is 245999.99999999997 in binary floating point: snap what is a whole millisecond in decimal.
    ms = Math.abs(exact - Math.round(exact)) < 1e-6 ? Math.round(exact) : exact
  } else {
    return `${describeValue(value)} is not a duration: use milliseconds as a number or a string such as '3s'`
  }
  if (!Number.isFinite(ms) || ms <= 0) return `${describeValue(value)} must be a positive duration`
  if (!Number.isInteger(ms)) return `${describeValue(value)} is not a whole number of milliseconds`
  if (ms > MAX_PERIOD_MS) return `${describeValue(value)} is longer than the maximum of 366 days`
  return ms
}

/** `3000` → `'3s'`, `90000` → `'90s'`, `3600000` → `'1h'`: the shortest exact spelling, used in the names of inline rules. */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['d', UNIT_MS.d],
    ['h', UNIT_MS.h],
    ['m', UNIT_MS.m],
    ['s', UNIT_MS.s],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}
