import { type AlgorithmName, createLimiter, type RulesOptions, type Store } from '@tollgate/core'
import { ManualClock } from './manual-clock.js'
import type { StoreHarness } from './store-conformance.js'
import { withAlgorithm } from './with-algorithm.js'

/** A time aligned to every period the conformance suites use, so fixed windows start at the clock's start. */
export const CONFORMANCE_T0 = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000)

/** How long a decision of the suites waits for its store: a loaded machine answers late, not wrong. */
const ANSWER_WITHIN_MS = 10_000

/**
 * A limiter on a store of the harness, over state no other test touches, at a clock of its own
 * from CONFORMANCE_T0. `fallback`: what rules that name no algorithm take, on a store without the
 * sliding log.
 */
export function conformanceLimiter(harness: StoreHarness, given: RulesOptions, fallback?: AlgorithmName) {
  const { store, clock } = conformanceStore(harness)
  return { limiter: limiterOn(store, given, fallback), clock, store }
}

/** A store of the harness at a clock of its own from CONFORMANCE_T0, for a suite that asks what it holds first. */
export function conformanceStore(harness: StoreHarness): { store: Store; clock: ManualClock } {
  const clock = new ManualClock(CONFORMANCE_T0)
  return { store: harness.makeStore(clock.now), clock }
}

/** The suites' limiter on `store`. */
export function limiterOn(store: Store, given: RulesOptions, fallback?: AlgorithmName) {
  const rules = withAlgorithm(given, fallback)
  return createLimiter({ store, rules, onWarning: () => {}, storeTimeoutMs: ANSWER_WITHIN_MS })
}
