import { type CallSettings, callSettingsOf, type DecisionOptions } from '../store-calls/decision-options.js'
import { describeValue, TollgateArgumentError } from '../support/errors.js'
import { checkOptionsObject, optionKeys } from '../support/option-objects.js'
import { MAX_TIMER_MS } from '../support/timer-delay.js'

export interface WaitOptions extends DecisionOptions {
  /**
   * The most milliseconds the wait lasts, from the call: then it rejects with `TG_WAIT_TIMEOUT`.
   * It rejects at once when the store answers that the units fit only later than that. `0`
   * takes the units only if they fit now and no earlier wait for the same rule and identifiers
   * is queued. A number from 0 to `MAX_TIMER_MS`.
   * @default 30000
   * @example limiter.wait('github.api', 'app:42', { maxWaitMs: 120_000 })
   */
  maxWaitMs?: number
  /**
   * Ends the wait when it aborts: it rejects with `TG_ABORTED`, the signal's reason as `cause`,
   * at once if the signal has already aborted.
   * @default undefined (the wait ends only when the units fit, at `maxWaitMs`, or on `close()`)
   * @example limiter.wait('github.api', 'app:42', { signal: request.signal })
   */
  signal?: AbortSignal
}

/**
 * Long enough for a queue to drain a few periods of a per-second limit, short enough that a
 * caller that forgot to bound its wait finds out rather than hanging on a limit per hour.
 */
export const DEFAULT_MAX_WAIT_MS = 30_000

/** A wait's options, checked once, as it begins. */
export interface WaitSettings {
  /** What each try passes to `consume`: frozen, so that it is checked once; undefined for the limiter's defaults. */
  readonly decision: DecisionOptions | undefined
  readonly call: CallSettings
  readonly maxWaitMs: number
  readonly signal: AbortSignal | undefined
}

const WAIT_OPTION_KEYS = optionKeys<WaitOptions>({
  cost: true,
  dryRun: true,
  onStoreError: true,
  storeTimeoutMs: true,
  maxWaitMs: true,
  signal: true,
})

/** `defaults` are the limiter's, as for `callSettingsOf`. Throws TG_INVALID_ARGUMENT. */
export function waitSettingsOf(raw: unknown, defaults: CallSettings): WaitSettings {
  if (raw === undefined)
    return { decision: undefined, call: defaults, maxWaitMs: DEFAULT_MAX_WAIT_MS, signal: undefined }
  const {
    maxWaitMs = DEFAULT_MAX_WAIT_MS,
    signal,
    ...rest
  } = checkOptionsObject(raw, WAIT_OPTION_KEYS, 'wait options', {
    shape: '{ cost, maxWaitMs, signal }',
    Failure: TollgateArgumentError,
  })
  if (typeof maxWaitMs !== 'number' || !(maxWaitMs >= 0 && maxWaitMs <= MAX_TIMER_MS)) {
    throw new TollgateArgumentError(
      `wait option maxWaitMs must be a number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${describeValue(maxWaitMs)}`,
    )
  }
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw new TollgateArgumentError(`wait option signal must be an AbortSignal, got ${describeValue(signal)}`)
  }
  const given = Object.entries(rest).filter(([, value]) => value !== undefined)
  const decision = given.length === 0 ? undefined : (Object.freeze(Object.fromEntries(given)) as DecisionOptions)
  return { decision, call: callSettingsOf(decision, defaults), maxWaitMs, signal }
}

/** Told by its shape rather than `instanceof`, so that a signal from another realm or polyfill is one too. */
function isAbortSignal(value: unknown): value is AbortSignal {
  const signal = value as Partial<AbortSignal> | null
  return (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function' &&
    typeof signal.removeEventListener === 'function'
  )
}
