import type { DecisionReason } from '../../rules/decision.js'

/**
 * The outcome of a decision as metrics label it, one per `DecisionReason` (`ok` is `allowed`),
 * in the order `DecisionCounts` keeps its counts.
 */
export const DECISION_OUTCOMES = [
  'allowed',
  'limited',
  'shed',
  'dry_run',
  'store_error_allowed',
  'store_error_denied',
  'local_fallback',
  'degraded_local',
  'overloaded',
  'blocked',
] as const

export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number]

/** The index of `allowed` in DECISION_OUTCOMES. */
export const ALLOWED = 0

/** The reason's index in DECISION_OUTCOMES: string comparisons, most frequent first, no lookup. */
export function outcomeOf(reason: DecisionReason): number {
  switch (reason) {
    case 'ok':
      return ALLOWED
    case 'limited':
      return 1
    case 'shed':
      return 2
    case 'dry-run':
      return 3
    case 'store-error-allowed':
      return 4
    case 'store-error-denied':
      return 5
    case 'local-fallback':
      return 6
    case 'degraded-local':
      return 7
    case 'overloaded':
      return 8
    case 'blocked':
      return 9
  }
}

/**
 * The outcome label of a decision's reason.
 * @example decisionOutcome('store-error-allowed') // 'store_error_allowed'
 */
export function decisionOutcome(reason: DecisionReason): DecisionOutcome {
  return DECISION_OUTCOMES[outcomeOf(reason)] as DecisionOutcome
}
