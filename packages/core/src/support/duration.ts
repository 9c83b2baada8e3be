import { describeValue } from './errors.js'

const MS = 1
const SECOND = 1_000
const MINUTE = 60_000
const HOUR = 3_600_000
const DAY = 86_400_000

/** Every unit a duration may be written in, as `parseDuration` reads it (in any letter case). */
export type DurationUnit =
  | 'ms'
  | 'millisecond'
  | 'milliseconds'
  | 's'
  | 'sec'
  | 'second'
  | 'seconds'
  | 'm'
  | 'min'
  | 'minute'
  | 'minutes'
  | 'h'
  | 'hr'
  | 'hour'
  | 'hours'
  | 'd'
  | 'day'
  | 'days'

/** A Record, so that the type and the table the parser reads list the same units. */
const UNITS: Readonly<Record<DurationUnit, number>> = {
  ms: MS,
  millisecond: MS,
  milliseconds: MS,
  s: SECOND,
  sec: SECOND,
  second: SECOND,
  seconds: SECOND,
  m: MINUTE,
  min: MINUTE,
  minute: MINUTE,
  minutes: MINUTE,
  h: HOUR,
  hr: HOUR,
  hour: HOUR,
  hours: HOUR,
  d: DAY,
  day: DAY,
  days: DAY,
}

/** A unit as people write it: `minutes`, `Minutes` or `MINUTES` (the parser takes any case). */
type WrittenUnit = DurationUnit | Capitalize<DurationUnit> | Uppercase<DurationUnit>

/**
 * A duration: milliseconds as a number, or a decimal number and a unit, with or without a space
 * between them. The units are `ms`/`millisecond(s)`, `s`/`sec`/`second(s)`, `m`/`min`/`minute(s)`,
 * `h`/`hr`/`hour(s)` and `d`/`day(s)`.
 * @example '500ms'
 * @example '15 minutes'
 * @example 60_000
 */
export type Duration = number | `${number}${WrittenUnit}` | `${number} ${WrittenUnit}`

const DURATION = /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$/i

const ACCEPTED =
  "use milliseconds as a number, or a number and a unit such as '500ms', '3s', '15 minutes', '1h', '1 day' (units: ms, millisecond(s), s, sec, second(s), m, min, minute(s), h, hr, hour(s), d, day(s))"

/** The longest period a window may have: long enough for any quota, short enough that millisecond timestamps plus a period stay exact doubles. */
export const MAX_PERIOD_MS = 366 * DAY

/**
 * Parses `500` (milliseconds), `'500ms'`, `'3s'`, `'1.5m'`, `'15 minutes'`, `'1h'` or `'1 day'`
 * into whole milliseconds. Returns an error message instead of throwing so that callers can name
 * where the value came from.
 */
export function parseDuration(value: unknown): number | string {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = DURATION.exec(value)
    const unit = match?.[2]?.toLowerCase()
    if (!match || unit === undefined || !Object.hasOwn(UNITS, unit)) {
      return `${describeValue(value)} is not a duration: ${ACCEPTED}`
    }
    const exact = Number(match[1]) * UNITS[unit as DurationUnit]
    // '4.1m' is 245999.99999999997 in binary floating point: snap what is a whole millisecond in decimal.
    ms = Math.abs(exact - Math.round(exact)) < 1e-6 ? Math.round(exact) : exact
  } else {
    return `${describeValue(value)} is not a duration: ${ACCEPTED}`
  }
  if (!Number.isFinite(ms) || ms <= 0) return `${describeValue(value)} must be a positive duration`
  if (!Number.isInteger(ms)) return `${describeValue(value)} is not a whole number of milliseconds`
  if (ms > MAX_PERIOD_MS) return `${describeValue(value)} is longer than the maximum of 366 days`
  return ms
}

/**
 * A whole number of milliseconds as the shortest exact duration `parseDuration` reads back: in
 * the names of inline rules, and wherever a period is shown to people (the `tollgate` CLI).
 * @example formatDuration(90_000) // '90s'
 * @example formatDuration(3_600_000) // '1h'
 */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['d', DAY],
    ['h', HOUR],
    ['m', MINUTE],
    ['s', SECOND],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}
