import type { Decision } from '../rules/decision.js'
import type { DecisionOptions } from '../store-calls/decision-options.js'
import { describeValue, TollgateArgumentError } from '../support/errors.js'

/**
 * Units charged for a cost not known yet (an LLM's tokens, an upload's bytes): `reserve` charged
 * the estimate, or was refused. Whichever of `settle` and `cancel` is called first writes, once;
 * the other, and any call after, does nothing.
 */
export interface Reservation {
  /** The decision on the estimate: a refused reservation charged nothing, and settles nothing. */
  readonly decision: Decision
  /**
   * Charges the actual cost in place of the estimate: the difference is given back when the cost
   * came under it, and charged when above, whether it fits or not: what passes a limit is debt,
   * which later requests wait out (a bucket refills it, a log's entries leave, a counter's window
   * ends). Store failures reject (code `TG_STORE`); the write is then unknown, and not retried.
   * @example await reservation.settle(usage.totalTokens)
   */
  settle(actualCost: number): Promise<void>
  /** Gives the estimate back, as `refund` does. Store failures reject (code `TG_STORE`). */
  cancel(): Promise<void>
}

/** What a reservation writes with: the limiter's `refund`, and its `charge` (StoreOperation). */
export interface ReservationWrites {
  refund(cost: number): Promise<unknown>
  charge(cost: number): Promise<unknown>
}

/**
 * A reservation on `decision`, charged with `estimate` when it is `ok`. A decision allowed
 * without a charge (dry run, the store failing open) or refused holds nothing to settle.
 */
export function reservationOf(decision: Decision, estimate: number, writes: ReservationWrites): Reservation {
  let open = decision.reason === 'ok'
  const close = () => {
    const was = open
    open = false
    return was
  }
  return {
    decision,
    settle(actualCost: number) {
      if (typeof actualCost !== 'number' || !Number.isSafeInteger(actualCost) || actualCost < 0) {
        return Promise.reject(
          new TollgateArgumentError(
            `settle: actualCost must be a non-negative integer, got ${describeValue(actualCost)}`,
          ),
        )
      }
      if (!close() || actualCost === estimate) return Promise.resolve()
      const written =
        actualCost < estimate ? writes.refund(estimate - actualCost) : writes.charge(actualCost - estimate)
      return written.then(() => {})
    },
    cancel() {
      if (!close() || estimate === 0) return Promise.resolve()
      return writes.refund(estimate).then(() => {})
    },
  }
}

/** The options of a reservation's writes: the reservation's own, but for its cost. */
export function writeOptionsOf(options: DecisionOptions | undefined, cost: number): DecisionOptions {
  return options === undefined ? { cost } : { ...options, cost }
}
