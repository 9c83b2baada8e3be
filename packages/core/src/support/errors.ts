/**
 * Stable error codes: callers branch on `code`, never on message text.
 * - `TG_CONFIG`: a limiter, rule, window or store option is invalid (thrown at construction).
 * - `TG_UNKNOWN_RULE`: a decision names a rule the limiter does not hold (or an HTTP `rule`
 *   function chose one).
 * - `TG_INVALID_ARGUMENT`: a decision's identifiers or cost are unusable (thrown before any I/O),
 *   a wait's options are, or its cost is above a window's limit; or an HTTP `refusal` function
 *   returned a response that cannot be sent.
 * - `TG_CLOSED`: a decision was asked of a limiter that is closing or closed, or a wait was
 *   pending when it closed.
 * - `TG_STORE`: the store failed or answered something it should not have.
 * - `TG_CONFLICT`: a live rules publish expected one epoch and found another; nothing was written.
 * - `TG_WAIT_TIMEOUT`: a `limiter.wait` ended at its `maxWaitMs` (or at once, when the store said
 *   the units fit only later) without its units; nothing was charged.
 * - `TG_ABORTED`: a `limiter.wait`'s `signal` aborted; the signal's reason is the `cause`.
 */
export type TollgateErrorCode =
  | 'TG_CONFIG'
  | 'TG_UNKNOWN_RULE'
  | 'TG_INVALID_ARGUMENT'
  | 'TG_CLOSED'
  | 'TG_STORE'
  | 'TG_CONFLICT'
  | 'TG_WAIT_TIMEOUT'
  | 'TG_ABORTED'

export interface TollgateErrorOptions extends ErrorOptions {
  /**
   * For a `TG_STORE` error: `true` when it says the store itself is failing (unreachable, too
   * slow, out of memory, read-only…), `false` when only this decision failed while the store
   * works (a key holding the wrong type or unreadable state). The circuit breaker counts only the
   * first kind; a store's own failures that are not marked `false` count.
   * @default undefined (counted as the store failing)
   * @example new TollgateError('TG_STORE', `state of ${key} is unreadable`, { storeDown: false })
   */
  storeDown?: boolean
}

export class TollgateError extends Error {
  readonly code: TollgateErrorCode
  /** See TollgateErrorOptions.storeDown. */
  readonly storeDown?: boolean

  constructor(code: TollgateErrorCode, message: string, options?: TollgateErrorOptions) {
    super(message, options)
    this.name = 'TollgateError'
    this.code = code
    if (options?.storeDown !== undefined) this.storeDown = options.storeDown
  }
}

/** Thrown at construction: the message names the rule, window, option and offending value. */
export class TollgateConfigError extends TollgateError {
  constructor(message: string) {
    super('TG_CONFIG', message)
    this.name = 'TollgateConfigError'
  }
}

/**
 * A TypeError (so `instanceof TypeError` holds for bad cost or identifiers) that also carries
 * a stable code like every other Tollgate error.
 */
export class TollgateArgumentError extends TypeError {
  readonly code = 'TG_INVALID_ARGUMENT' as const

  constructor(message: string) {
    super(message)
    this.name = 'TollgateArgumentError'
  }
}

export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value)
  }
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'function') return 'a function'
  if (value === null || typeof value !== 'object') return String(value)
  try {
    const json = JSON.stringify(value)
    return json.length > 80 ? `${json.slice(0, 77)}...` : json
  } catch {
    return Object.prototype.toString.call(value)
  }
}

/**
 * Whether a failure says the store itself is failing (a timeout, a lost connection, a refused
 * call, an error from a custom store), rather than a failure its store marked as one decision's
 * own (`storeDown: false`), such as a key of the wrong type: the store answered, and other
 * decisions may go on using it.
 */
export function isStoreDown(error: unknown): boolean {
  return !(error instanceof TollgateError && error.storeDown === false)
}
