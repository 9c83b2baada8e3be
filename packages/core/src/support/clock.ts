import { describeValue, TollgateConfigError, TollgateError } from './errors.js'

/** Milliseconds since the epoch, as whole numbers. */
export type Clock = () => number

export const systemClock: Clock = () => Date.now()

/** The latest time a Date can hold: with a period of up to 366 days added, still an exact double. */
export const MAX_TIME_MS = 8_640_000_000_000_000

/**
 * The time a store's `clock` returned, if it is one: whole milliseconds from 0 to MAX_TIME_MS.
 * Anything else (NaN, a string, a fraction, a negative number, 1e20) would compare false or true
 * everywhere and silently admit or refuse everything, so the decision fails instead, as a store
 * error (`TG_STORE`), before any state is read or written.
 */
export function timeFrom(clock: Clock, store: string): number {
  // Date.now() needs no check: it returns whole milliseconds.
  if (clock === systemClock) return Date.now()
  const now: unknown = clock()
  if (typeof now !== 'number' || !Number.isInteger(now) || now < 0 || now > MAX_TIME_MS) {
    throw new TollgateError(
      'TG_STORE',
      `${store} option clock returned ${describeValue(now)}; a clock must return whole milliseconds since the epoch, from 0 to ${MAX_TIME_MS}`,
    )
  }
  return now
}

/**
 * `clock` as a store's option: a function, called once here so that one returning no time (a
 * string, NaN, seconds instead of milliseconds as a fraction) is found at construction rather
 * than at every decision. A clock that goes bad later still fails each decision it times.
 */
export function clockOption(clock: unknown, owner: string): Clock {
  if (typeof clock !== 'function') {
    throw new TollgateConfigError(`${owner} option clock must be a function, got ${describeValue(clock)}`)
  }
  try {
    timeFrom(clock as Clock, owner)
  } catch (error) {
    const said =
      error instanceof TollgateError ? error.message : `threw ${describeValue((error as Error)?.message ?? error)}`
    throw new TollgateConfigError(
      error instanceof TollgateError
        ? `${said} (called once at construction)`
        : `${owner} option clock ${said} when called at construction`,
    )
  }
  return clock as Clock
}
