import type { Reservation } from '../limiter/reservation.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { whenAnswered } from './count-only.js'
import type { ObservedResponse } from './observed-response.js'
import type { RateLimitOptions } from './rate-limit-options.js'

/** What `settle` is, checked: a function of the request and its response. */
export type SettleCost<Req> = NonNullable<RateLimitOptions<Req>['settle']>

const NO_RESPONSE =
  'option settle is set but the adapter gave no response to watch (fastify.tollgate.check without reply?), so requests keep their estimated cost'
const NOT_A_COST =
  'option settle returned something other than a non-negative integer; the request keeps its estimated cost'
const SETTLE_FAILED = "a request's cost could not be settled, so it keeps its estimated cost"

export function settleOf<Req>(options: RateLimitOptions<Req>): SettleCost<Req> | undefined {
  const { settle, countOnly } = options
  if (settle === undefined) return undefined
  if (typeof settle !== 'function') {
    throw new TollgateConfigError(
      `option settle must be a function of the request and its response returning the actual cost, got ${describeValue(settle)}`,
    )
  }
  if (countOnly !== undefined) {
    throw new TollgateConfigError(
      'options settle and countOnly both adjust a charge once the response is done: use settle alone, returning 0 for a response that should not count',
    )
  }
  return settle
}

/**
 * Settles a request's reservation once its response is done, with the cost `settle` gives. Never
 * throws nor rejects: a function that fails or answers no cost, or a write the store refuses,
 * leaves the estimate charged, with a warning (`TG_SETTLE_FAILED`, once each).
 */
export function costSettler<Req>(
  settle: SettleCost<Req>,
  warnOnce: (key: string, message: string, code: string) => void,
): (response: ObservedResponse | undefined, request: Req, reservation: Reservation) => void {
  const settled = (request: Req, response: ObservedResponse, reservation: Reservation) =>
    // A promise the function returns is waited for, and one it throws caught, by the chain itself.
    Promise.resolve()
      .then(() => settle(request, response))
      .then((cost: unknown) => {
        if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
          warnOnce('not-a-cost', `${NOT_A_COST}: got ${describeValue(cost)}`, 'TG_SETTLE_FAILED')
          return
        }
        return reservation.settle(cost)
      })
      .catch((error: unknown) =>
        warnOnce(
          'settle-failed',
          `${SETTLE_FAILED}: ${error instanceof Error ? error.message : String(error)}`,
          'TG_SETTLE_FAILED',
        ),
      )
  return (response, request, reservation) => {
    if (response === undefined) warnOnce('no-response', NO_RESPONSE, 'TG_SETTLE_FAILED')
    else whenAnswered(response, () => void settled(request, response, reservation))
  }
}
