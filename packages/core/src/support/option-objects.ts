import { describeValue, TollgateConfigError } from './errors.js'
import type { ForeignOptions } from './foreign-options.js'

/**
 * The keys an options type `T` takes, listed once. Built by `optionKeys`, whose argument must name
 * every key of `T` and nothing else, so that an option added to the type but not to its list (or
 * listed but not in the type) fails to compile instead of being refused at run time.
 */
export type OptionKeys<T> = ReadonlySet<string> & { readonly [OPTIONS]?: T }

declare const OPTIONS: unique symbol

/** @example const KEYS = optionKeys<WindowOptions>({ limit: true, period: true }) */
export function optionKeys<T>(keys: { readonly [K in keyof T]-?: true }): OptionKeys<T> {
  return new Set(Object.keys(keys))
}

export interface OptionsObjectCheck {
  /** Shown after "must be an object" to say what the object holds. @example '{ rules }' */
  shape?: string
  /** The error class thrown: a configuration error unless the object came with a call. */
  Failure?: new (
    message: string,
  ) => Error
  /**
   * Other rate limiters' options that people moving from them put here, each with the sentence
   * that names the Tollgate option replacing it: said instead of the list of known options.
   */
  foreign?: ForeignOptions
}

/**
 * `raw` as an object whose every key is one of `keys`, or an error naming `where`, the value and
 * the known keys. Its values are `unknown`: each is still the caller's to check.
 */
export function checkOptionsObject<T>(
  raw: unknown,
  keys: OptionKeys<T>,
  where: string,
  { shape, Failure = TollgateConfigError, foreign }: OptionsObjectCheck = {},
): { readonly [K in keyof T]?: unknown } {
  if (!isPlainObject(raw)) {
    throw new Failure(`${where} must be an object${shape ? ` ${shape}` : ''}, got ${describeValue(raw)}`)
  }
  rejectUnknownKeys(raw, keys, where, Failure, foreign)
  return raw as { readonly [K in keyof T]?: unknown }
}

export function rejectUnknownKeys(
  raw: Record<string, unknown>,
  known: ReadonlySet<string>,
  where: string,
  Failure: new (message: string) => Error = TollgateConfigError,
  foreign?: ForeignOptions,
): void {
  for (const key of Object.keys(raw)) {
    if (known.has(key)) continue
    const replacement = foreign?.get(key)
    if (replacement !== undefined) throw new Failure(`${where}: unknown option '${key}': ${replacement}`)
    throw new Failure(
      `${where}: unknown option '${key}'; known options are ${[...known].map((k) => `'${k}'`).join(', ')}`,
    )
  }
}

/**
 * `value` if it is a whole number from `least` to `most`, or a configuration error that names
 * `where`'s option `name` and the value. A delay handed to a timer takes `MAX_TIMER_MS` as `most`.
 * @example wholeOption('shareFleetStats', 'topSize', raw.topSize ?? 200, 1)
 */
export function wholeOption(
  where: string,
  name: string,
  value: unknown,
  least: number,
  most = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < least) {
    throw new TollgateConfigError(`${where} option ${name} must be an integer ≥ ${least}, got ${describeValue(value)}`)
  }
  if (value > most) {
    throw new TollgateConfigError(`${where} option ${name} must be at most ${most}, got ${describeValue(value)}`)
  }
  return value
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** `value` if it is an integer from `min` to `max`, else a configuration error naming `what` and the value. */
export function integerOption(value: unknown, min: number, max: number, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TollgateConfigError(`${what} must be an integer from ${min} to ${max}, got ${describeValue(value)}`)
  }
  return value
}
