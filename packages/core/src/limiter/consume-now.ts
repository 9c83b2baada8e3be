import type { Decision } from '../rules/decision.js'
import type { DecisionOptions } from '../store-calls/decision-options.js'

/**
 * `consume` as the HTTP adapters call it: a decision made in the process comes back as it is,
 * one that waited for a store in a promise. An adapter that gets the decision at once answers
 * the request in the same turn, where a promise would cost it two or three turns of the
 * microtask queue and the promises between them (bench/README.md, HTTP). Never throws: a
 * failure comes as a rejected promise, as from `consume`.
 */
export type ConsumeNow = (
  rule: string,
  identifiers: string | readonly string[],
  options?: DecisionOptions,
) => Decision | Promise<Decision>

/**
 * Where a limiter keeps its ConsumeNow. Registered, so that a limiter made by another copy of
 * core in the same process (one loaded as ESM, one as CommonJS) has it under the same key.
 */
export const CONSUME_NOW: unique symbol = Symbol.for('tollgate.consumeNow') as never

/** What consumeNowOf needs of a limiter: its `consume`, and its ConsumeNow if it has one. */
interface Consuming {
  consume(rule: string, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  [CONSUME_NOW]?: ConsumeNow
}

/** The limiter's ConsumeNow; `consume` itself for a limiter from a copy of core without one. */
export function consumeNowOf(limiter: Consuming): ConsumeNow {
  const own = limiter[CONSUME_NOW]
  return own ?? ((rule, identifiers, options) => limiter.consume(rule, identifiers, options))
}

/**
 * A decision in a promise, as the limiter's methods answer one (`consume`, `peek`, `refund`, a
 * reservation's): one that waited for a store is in one already.
 */
export function promisedDecision(decision: Decision | Promise<Decision>): Promise<Decision> {
  if (decision instanceof Promise) return decision
  // Read for V8's optimizing compiler alone: it then knows the decision's shapes, none of which
  // has a `then`, and fulfils the promise with it as it is. Otherwise `Promise.resolve` looks for
  // a `then` along the decision's prototype chain, on every decision (bench/README.md).
  void decision.allowed
  return Promise.resolve(decision)
}

/** What answered at once, in a promise, for the callers that promise one (the HTTP engine's `check`). */
export function promised<T>(value: T | Promise<T>): Promise<T> {
  return value instanceof Promise ? value : Promise.resolve(value)
}

/** Whether a value a caller's function returned must be waited for, as `await` would. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  )
}
