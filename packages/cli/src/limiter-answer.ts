import type { Decision } from '@tollgate/core'

/**
 * The decision, or the store's failure thrown: a peek that Redis did not answer has no windows
 * to show, and an admin command must say so rather than show a fallback's.
 */
export function limiterAnswer(decision: Decision): Decision {
  if (decision.error !== undefined) throw decision.error
  return decision
}
