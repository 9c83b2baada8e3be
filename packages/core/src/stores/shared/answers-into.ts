import type { Store, StoreReceiver, StoreRequest } from '../store.js'

/**
 * A store of this package that answers a decision it sends away through a receiver, not a
 * promise: a RedisStore settles each decision of a batched round trip with a call, rather than a
 * promise and its continuations. Not part of the `Store` interface, which decides two ways,
 * `evaluate` and `evaluateSync`: this is how this package's own stores answer `evaluate`, reached
 * by the limiter directly. Registered, so that a store made by another copy of core in the same
 * process (one loaded as ESM, one as CommonJS) is answered the same way: a receiver is the public
 * `StoreReceiver`.
 */
export const ANSWERS_INTO: unique symbol = Symbol.for('tollgate.answersInto') as never

export interface AnswersInto {
  /**
   * The answer `evaluate` would resolve with, delivered to `receiver` exactly once instead. A
   * store that also has `evaluateSync` is asked here only for a request that `evaluateSync` has
   * just left undefined, so that it need not ask itself again. The receiver's methods never throw.
   */
  [ANSWERS_INTO](request: StoreRequest, receiver: StoreReceiver): void
}

/** A store's way of answering into a receiver, bound to the store. */
export type AnswerInto = (request: StoreRequest, receiver: StoreReceiver) => void

/** How the limiter hands `store` a receiver, if it takes one: its own way, else the deprecated `evaluateInto`. */
export function answersIntoOf(store: Store): AnswerInto | undefined {
  const own = (store as Partial<AnswersInto>)[ANSWERS_INTO]
  if (typeof own === 'function') return own.bind(store)
  return store.evaluateInto?.bind(store)
}
