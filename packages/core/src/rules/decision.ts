import type { TollgateError } from '../support/errors.js'

/**
 * - `ok`: every window had room; the cost was charged (or, for `peek`, would be).
 * - `limited`: at least one window refused; nothing was charged.
 * - `shed`: every window had room, but a window with `lowBurst` shed the request (see the
 *   README's "Shedding"); nothing was charged, and the shedding windows are `failed`.
 * - `blocked`: the identifier is blocked (a rule's `block`): by a block in force, or by one this
 *   refusal started; nothing was charged, `retryAfterMs` runs until the block ends, and the
 *   window whose refusals started it is `failed`.
 * - `dry-run`: a window refused or shed, but the decision was in dry run (its call's `dryRun`,
 *   else its rule's, else the limiter's), so it lets the request through (`retryAfterMs` 0) and
 *   charges nothing; `windows` still say which window refused or shed.
 * - `store-error-allowed`: the store failed or did not answer in time and the policy is
 *   `'allow'` (fail open); `windows` is empty, `error` says what happened.
 * - `store-error-denied`: the same with the policy `'deny'` (fail closed).
 * - `local-fallback`: the same with a `'local'` policy: decided on this process's own count from
 *   the failure on, `allowed` and `windows` that count's answer, `error` the store's failure. The
 *   limiter's `onStoreError: 'local'` counts against the whole limit; a HybridStore's outage
 *   policies `'local'` and `'local-share'` against the whole limit or this process's share.
 * - `degraded-local`: deprecated, no longer given: a HybridStore's local outage policies answered
 *   with it; they answer `local-fallback`, as every store's failure does.
 * - `overloaded`: refused without asking the store, because the limiter already had its
 *   `backlog.max` decisions waiting for it (`backlog.whenFull: 'refuse'`); `windows` is empty.
 */
export type DecisionReason =
  | 'ok'
  | 'limited'
  | 'shed'
  | 'blocked'
  | 'dry-run'
  | 'store-error-allowed'
  | 'store-error-denied'
  | 'local-fallback'
  /** @deprecated no longer given: a HybridStore's local outage decisions are `local-fallback`. */
  | 'degraded-local'
  | 'overloaded'

export interface WindowState {
  /** The rule this window belongs to: the decision's own rule or one of its parents. @example 'auth.createToken' */
  rule: string
  /** The identifier this window counts for. @example 'ip:203.0.113.7' */
  identifier: string
  /** @example 5 */
  limit: number
  /** @example 3000 */
  periodMs: number
  /** Whole units left in this window after the decision. @example 0 */
  remaining: number
  /** Epoch milliseconds at which this window next frees a unit; the decision's time when nothing is used. @example 1763712003000 */
  resetAtMs: number
  /** Whether this window refused the request. @example true */
  failed: boolean
}

export interface Decision {
  /** Whether the request may proceed. @example false */
  allowed: boolean
  /** Why: a real pass or a real refusal. @example 'limited' */
  reason: DecisionReason
  /** The rule the decision was asked of. @example 'auth.createToken' */
  rule: string
  /** Units this request asked for. @example 1 */
  cost: number
  /**
   * 0 when allowed, dry runs included; else milliseconds until this same request would fit,
   * `Infinity` when its cost exceeds a window's limit. For a `shed` decision: until each shedding
   * window's use after the cost would be at most its `lowBurst` (at least 1).
   * @example 2100
   */
  retryAfterMs: number
  /** The time the store decided at, epoch milliseconds (the Redis server's clock by default). @example 1763712000900 */
  nowMs: number
  /** Every window of the rule and its parents, for every identifier: rule order, then identifier order, then window order. Empty when the store failed. */
  windows: WindowState[]
  /** For `store-error-*` and `local-fallback` reasons: the store's failure (code `TG_STORE`), its original error as `cause`. */
  error?: TollgateError
}
