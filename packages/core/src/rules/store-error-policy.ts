import { describeValue, type TollgateError } from '../support/errors.js'
import type { Decision } from './decision.js'

/**
 * What a decision answers when the store fails or does not answer within its bound:
 * `'allow'` lets the request through (fail open), `'deny'` refuses it (fail closed), `'local'`
 * counts in the process alone with the same rules until the store is back (each process then
 * counts on its own, so N processes admit up to N times the limit meanwhile). A HybridStore's
 * outage policy speaks the same words, and adds `'local-share'` (each process its share).
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

/** How long a refused-for-failure client is asked to wait: about the time a store takes to come back from a blip. */
const RETRY_AFTER_STORE_ERROR_MS = 1_000

/** The decision `'allow'` or `'deny'` makes without the store. */
export function storeFailureDecision(
  rule: string,
  cost: number,
  policy: 'allow' | 'deny',
  error: TollgateError,
): Decision {
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
