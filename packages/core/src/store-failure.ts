import type { Decision } from './decision.js'
import { TollgateError } from './errors.js'

/**
 * What a decision answers when the store fails or does not answer within its bound:
 * `'allow'` lets the request through (fail open), `'deny'` refuses it (fail closed).
 */
export type StoreErrorPolicy = 'allow' | 'deny'

export const STORE_ERROR_POLICIES: readonly StoreErrorPolicy[] = ['allow', 'deny']

/** How long a refused-for-failure client is asked to wait: about the time a store takes to come back from a blip. */
const RETRY_AFTER_STORE_ERROR_MS = 1_000

/**
 * Settles with `work`, or rejects after `timeoutMs`. The work itself cannot be cancelled (a
 * command already sent to Redis will still be answered), so its late rejection is observed
 * here rather than left unhandled.
 */
export function withTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new TollgateError('TG_STORE', `the store did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    )
    work.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

export function storeFailureDecision(rule: string, cost: number, policy: StoreErrorPolicy, cause: unknown): Decision {
  const error =
    cause instanceof TollgateError
      ? cause
      : new TollgateError('TG_STORE', `the store failed: ${(cause as Error)?.message ?? String(cause)}`, { cause })
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
