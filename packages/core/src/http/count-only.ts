import type { Limiter } from '../limiter/limiter.js'
import type { DecisionOptions } from '../store-calls/decision-options.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import type { ObservedResponse } from './observed-response.js'
import type { RateLimitOptions, ResponseOutcome } from './rate-limit-options.js'

/**
 * Calls `then` once, with the status sent, or undefined when the connection closed before the
 * app ended the response. `finish` comes first when a response completes; `close` alone means
 * the client went away (Fastify's `onResponse` never runs then, which is why this listens here).
 */
export function whenAnswered(response: ObservedResponse, then: (status: number | undefined) => void): void {
  let answered = false
  const settle = () => {
    if (answered) return
    answered = true
    then(response.writableEnded ? response.statusCode : undefined)
  }
  response.once('finish', settle)
  response.once('close', settle)
}

/** What `countOnly` asks of an outcome: keep the charge (true) or give it back (false). */
export type KeepsCharge<Req> = (outcome: ResponseOutcome<Req>) => boolean | Promise<unknown>

/** Express-rate-limit's meaning of a failure, and the client going away counts as one. */
const isFailure = (status: number | undefined) => status === undefined || status >= 400

const FAILURES = <Req>({ status }: ResponseOutcome<Req>) => isFailure(status)
const SUCCESSES = <Req>({ status }: ResponseOutcome<Req>) => !isFailure(status)

export function countOnlyOf<Req>(value: RateLimitOptions<Req>['countOnly']): KeepsCharge<Req> | undefined {
  if (value === undefined) return undefined
  if (value === 'failures') return FAILURES
  if (value === 'successes') return SUCCESSES
  if (typeof value === 'function') return value
  throw new TollgateConfigError(
    `option countOnly must be 'failures', 'successes' or a function of the outcome, got ${describeValue(value)}`,
  )
}

/** What was charged for one request, to give back. */
export interface Charge<Req> {
  request: Req
  rule: string
  identifiers: string | readonly string[]
  cost: number
}

const NO_RESPONSE =
  'option countOnly is set but the adapter gave no response to watch (fastify.tollgate.check without reply?), so every response counts'
const NOT_A_BOOLEAN = 'option countOnly returned something other than true or false; the charge is kept, as for true'
const REFUND_FAILED = 'a charge countOnly gives back could not be given back, so that request stays counted'

/**
 * Watches the response to a charged request and gives the charge back once it has gone, unless
 * `keepsCharge` keeps it. Never throws nor rejects: a function that fails, or a refund the store
 * refuses, leaves the charge, with a warning (`TG_REFUND_FAILED`, once each).
 */
export function chargeSettler<Req>(
  keepsCharge: KeepsCharge<Req>,
  limiter: Limiter,
  refundOptions: Omit<DecisionOptions, 'cost'>,
  warnOnce: (key: string, message: string, code: string) => void,
): (response: ObservedResponse | undefined, charge: Charge<Req>) => void {
  const giveBack = ({ request, rule, identifiers, cost }: Charge<Req>, status: number | undefined) =>
    Promise.resolve()
      .then(() => keepsCharge({ request, status }))
      .then((kept) => {
        if (kept === false) return limiter.refund(rule, identifiers, { ...refundOptions, cost })
        if (kept !== true) warnOnce('not-a-boolean', NOT_A_BOOLEAN, 'TG_REFUND_FAILED')
      })
      .catch((error: unknown) =>
        warnOnce(
          'refund-failed',
          `${REFUND_FAILED}: ${error instanceof Error ? error.message : String(error)}`,
          'TG_REFUND_FAILED',
        ),
      )
  return (response, charge) => {
    if (response === undefined) warnOnce('no-response', NO_RESPONSE, 'TG_REFUND_FAILED')
    else whenAnswered(response, (status) => void giveBack(charge, status))
  }
}
