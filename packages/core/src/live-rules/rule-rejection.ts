/** A stored rule this process would not apply: the last good version of the rule stays. */
export interface RuleRejection {
  readonly rule: string
  /** The epoch that stored it. */
  readonly epoch: number
  /** Why, as createLimiter would have said it. @example "rule 'api', window 0: limit must be a positive integer, got 0" */
  readonly message: string
}
