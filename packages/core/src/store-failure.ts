import type { Decision } from './decision.js'
import { describeValue, TollgateError } from './errors.js'

/**
 * What a decision answers when the store fails or does not answer within its bound:
 * `'allow'` lets the request through (fail open), `'deny'` refuses it (fail closed), `'local'`
 * decides on an in-process store with the same rules until the store is back (each process then
 * counts on its own, so N processes admit up to N times the limit meanwhile).
 */
export type StoreErrorPolicy = 'allow' | 'deny' | 'local'

export const STORE_ERROR_POLICIES: readonly StoreErrorPolicy[] = ['allow', 'deny', 'local']

export function storeErrorPolicyOf(
  value: unknown,
  Failure: new (message: string) => Error,
  what: string,
): StoreErrorPolicy {
  if (!STORE_ERROR_POLICIES.includes(value as StoreErrorPolicy)) {
    throw new Failure(
      `${what} must be ${STORE_ERROR_POLICIES.map((p) => `'${p}'`).join(' or ')}, got ${describeValue(value)}`,
    )
  }
  return value as StoreErrorPolicy
}

/** Past about a minute a "bounded" wait bounds nothing. */
export function storeTimeoutOf(value: unknown, Failure: new (message: string) => Error, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 60_000) {
    throw new Failure(`${what} must be an integer number of milliseconds from 1 to 60000, got ${describeValue(value)}`)
  }
  return value
}

/** Any store failure as a Tollgate error with code TG_STORE, the original kept as `cause`. */
export function asStoreError(cause: unknown): TollgateError {
  if (cause instanceof TollgateError && cause.code === 'TG_STORE') return cause
  return new TollgateError('TG_STORE', `the store failed: ${(cause as Error)?.message ?? String(cause)}`, { cause })
}

/**
 * Calls the store and bounds the wait. A custom store that throws instead of rejecting is
 * treated the same, and every failure comes out as TG_STORE.
 */
export function callStore<T>(call: () => Promise<T>, timeoutMs: number, onLateAnswer?: (value: T) => void): Promise<T> {
  let work: Promise<T>
  try {
    work = call()
  } catch (error) {
    return Promise.reject(asStoreError(error))
  }
  return withTimeout(work, timeoutMs, onLateAnswer).catch((error: unknown) => Promise.reject(asStoreError(error)))
}

/** How long a refused-for-failure client is asked to wait: about the time a store takes to come back from a blip. */
const RETRY_AFTER_STORE_ERROR_MS = 1_000

/**
 * Settles with `work`, or rejects after `timeoutMs`. The work itself cannot be cancelled (a
 * command already sent to Redis will still be answered), so its late rejection is observed
 * here rather than left unhandled.
 */
export function withTimeout<T>(work: Promise<T>, timeoutMs: number, onLateAnswer?: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let late = false
    const timer = setTimeout(() => {
      late = true
      reject(new TollgateError('TG_STORE', `the store did not answer within ${timeoutMs} ms`))
    }, timeoutMs)
    work.then(
      (value) => {
        clearTimeout(timer)
        if (late) onLateAnswer?.(value)
        else resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

export function storeFailureDecision(rule: string, cost: number, policy: 'allow' | 'deny', cause: unknown): Decision {
  const error = asStoreError(cause)
  const allowed = policy === 'allow'
  return {
    allowed,
    reason: allowed ? 'store-error-allowed' : 'store-error-denied',
    rule,
    cost,
    retryAfterMs: allowed ? 0 : RETRY_AFTER_STORE_ERROR_MS,
    nowMs: Date.now(),
    windows: [],
    error,
  }
}
