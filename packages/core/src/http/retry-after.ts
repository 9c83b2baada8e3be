import type { Decision } from '../rules/decision.js'

/**
 * `Retry-After` in whole seconds for a refusal (rounded up, at least 1, so a client never
 * retries before the refusing windows free up), or undefined when the decision lets the request
 * through (dry runs included) or can never pass.
 */
export function retryAfterSeconds(decision: Decision): number | undefined {
  if (decision.allowed || !Number.isFinite(decision.retryAfterMs)) return undefined
  return Math.max(1, Math.ceil(decision.retryAfterMs / 1000))
}
