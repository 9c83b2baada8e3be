import { formatDuration } from '../support/duration.js'
import { describeValue, TollgateArgumentError, TollgateError } from '../support/errors.js'

/** A window too small for a wait's cost: where it is, and what it admits per period. */
export interface TooSmallWindow {
  readonly rule: string
  readonly identifier: string
  readonly limit: number
  readonly periodMs: number
}

/**
 * A cost above a window's limit never fits, however long one waits: `consume` refuses it with
 * `retryAfterMs` Infinity, the HTTP adapters answer 413, and a wait says so at once.
 */
export function neverFitsError(rule: string, cost: number, windows: readonly TooSmallWindow[]): TollgateArgumentError {
  const named = windows.map(
    (w) => `${w.limit} per ${formatDuration(w.periodMs)} (rule '${w.rule}', ${describeValue(w.identifier)})`,
  )
  const which =
    named.length === 0 ? 'a window' : `${named.length > 1 ? 'its windows' : 'its window'} ${named.join(', ')}`
  return new TollgateArgumentError(
    `cost ${cost} can never fit rule '${rule}': it is more than ${which} can admit in a whole period, so a wait for it would never end`,
  )
}

export function waitTimeoutError(rule: string, cost: number, maxWaitMs: number): TollgateError {
  return new TollgateError(
    'TG_WAIT_TIMEOUT',
    `rule '${rule}': ${units(cost)} did not fit within the wait's maxWaitMs (${maxWaitMs} ms)`,
  )
}

/** The store's answer already says the units fit after the wait's deadline: no use waiting for that. */
export function fitsTooLateError(rule: string, cost: number, retryAfterMs: number, leftMs: number, maxWaitMs: number) {
  const left = leftMs < maxWaitMs ? `the ${Math.max(0, Math.floor(leftMs))} ms left of ` : ''
  return new TollgateError(
    'TG_WAIT_TIMEOUT',
    `rule '${rule}': ${units(cost)} fit in ${retryAfterMs} ms at the earliest, later than ${left}the wait's maxWaitMs (${maxWaitMs} ms)`,
  )
}

export function waitAbortedError(rule: string, signal: AbortSignal): TollgateError {
  return new TollgateError('TG_ABORTED', `the wait for rule '${rule}' was aborted`, { cause: signal.reason })
}

export function waitClosedError(rule: string): TollgateError {
  return new TollgateError('TG_CLOSED', `the limiter was closed while a wait for rule '${rule}' was pending`)
}

function units(cost: number): string {
  return cost === 1 ? '1 unit' : `${cost} units`
}
