/**
 * The warnings a limiter gives its `onWarning`, by code (docs/errors.md): what its
 * `ignoreWarnings` option may name. A store's, a LiveRules' and `shareFleetStats`' warnings go to
 * their own `onWarning`.
 */
export const LIMITER_WARNING_CODES = [
  'TG_WINDOW_NEVER_BINDS',
  'TG_PERIOD_IN_MS',
  'TG_STORE_FAILING_OPEN',
  'TG_STORE_RECOVERED',
  'TG_BACKLOG_FULL',
  'TG_RULE_NAME_CLASH',
] as const

export type LimiterWarningCode = (typeof LIMITER_WARNING_CODES)[number]
