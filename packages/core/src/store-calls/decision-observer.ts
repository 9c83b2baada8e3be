import type { Decision } from '../rules/decision.js'
import type { Rule } from '../rules/rules.js'

/**
 * Why a store call failed, as metrics label it:
 * - `timeout`: the store did not answer within `storeTimeoutMs`;
 * - `unavailable`: the store, or its connection, failed in a way that says the store itself is
 *   failing (refused, lost, out of memory, read-only, a custom store's error);
 * - `key`: only this decision failed while the store works (`storeDown: false`: a key of
 *   another type, state that cannot be read);
 * - `breaker_open`: the open circuit breaker kept a decision or a reset from the store;
 * - `sync`: a HybridStore sync failed (reported from its `sync` events, not by the limiter).
 */
export type StoreErrorKind = 'timeout' | 'unavailable' | 'key' | 'breaker_open' | 'sync'

export const STORE_ERROR_KINDS: readonly StoreErrorKind[] = ['timeout', 'unavailable', 'key', 'breaker_open', 'sync']

/**
 * Sees what a limiter decides, on the decision path: attach one with `limiter.observe(observer)`.
 * `DecisionCounts` is one; `@tollgate/prometheus` and `@tollgate/opentelemetry` attach it.
 * @example
 * const detach = limiter.observe({
 *   timeEvery: 0,
 *   decided: (rule, decision) => { if (!decision.allowed) refusals++ },
 *   storeFailed: (kind) => { failures++ },
 * })
 */
export interface DecisionObserver {
  /**
   * Every `consume` decision, before its caller gets it (`peek` and `refund` admit nothing and
   * are not observed). `rule` is the rule the decision was asked of. It runs on the decision
   * path, so it must be quick, and it must not throw: what it throws rejects the decision, as a
   * `store-error` listener's would.
   */
  decided(rule: Rule, decision: Decision): void
  /**
   * How long the limiter took from asking the store to the decision, in seconds, for one
   * `consume` decision in `timeEvery`: called just before `decided` is called with that
   * decision. Required when `timeEvery` is above 0. Apart from `decided` so that the decisions
   * not timed, nearly all of them, run none of what a time costs.
   */
  timed?(seconds: number): void
  /** Each store failure, and each decision or reset the open circuit breaker kept from the store. */
  storeFailed(kind: StoreErrorKind): void
  /**
   * Times one `consume` decision in this many (two `performance.now()` reads); 0 times none.
   * With several observers attached, the limiter times one decision in the smallest nonzero
   * `timeEvery` among them, and each observer with `timed` gets every time taken.
   * @example 100
   */
  readonly timeEvery: number
}
