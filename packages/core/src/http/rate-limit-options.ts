import type { Limiter } from '../limiter/limiter.js'
import type { LiveRules } from '../live-rules/live-rules.js'
import type { Decision } from '../rules/decision.js'
import type { AlgorithmName, RulesOptions, WarningHandler, WindowOptions } from '../rules/rules.js'
import type { StoreErrorPolicy } from '../rules/store-error-policy.js'
import type { Store } from '../stores/store.js'
import { type OptionKeys, optionKeys } from '../support/option-objects.js'
import type { HeadersFormat, QuotaUnit } from './headers.js'
import type { ObservedResponse } from './observed-response.js'
import type { ProblemDetails } from './problem.js'
import type { RateLimitWarningCode } from './warnings.js'

/** What an adapter knows of the client before `identify` runs. */
export interface ClientView {
  /** The client address as the framework sees it, honouring its own proxy trust setting. */
  ip: string | undefined
  /**
   * The identifier the request counts for by default, always one: `ipIdentifier(ip, { ipv6Subnet })`;
   * for an address with a port (`203.0.113.7:51234`, `[2001:db8::1]:443`), the address's; for
   * anything else a proxy may put there (`unknown`), `ip:#<digest>` of the text; and
   * `ip:unknown` when the framework saw no address.
   * @example 'ip:203.0.113.7'
   */
  ipIdentifier: string
}

export type MaybePromise<T> = T | Promise<T>

/** How a response ended, for `countOnly`. */
export interface ResponseOutcome<Req> {
  request: Req
  /**
   * The status sent; undefined when the connection closed before the app had answered (the
   * client went away), which `'failures'` counts as a failure.
   * @example 401
   */
  status: number | undefined
}

/** A whole response to send for a refusal, built by the `refusal` option. */
export interface RefusalResponse {
  /** An integer from 200 to 599. @example 429 */
  status: number
  /**
   * Header fields, set over the rate limit fields and `Retry-After`: a name given here (in any
   * case) replaces the field of that name, and the others stay. A `Content-Type` here wins over
   * `contentType`.
   * @example { 'Cache-Control': 'no-store' }
   */
  headers?: Record<string, string>
  /**
   * @default 'application/json' for a body sent as JSON, 'application/octet-stream' for bytes,
   * else 'text/plain; charset=utf-8'
   */
  contentType?: string
  /** A string or bytes, sent as they are; anything else is sent as JSON. @default no body */
  body?: unknown
}

/** The refusal Tollgate sends unless `refusal` builds another: the start of one that changes a part. */
export interface StandardRefusal extends RefusalResponse {
  /** 429; 413 for a request that costs more than a window can ever admit; 503 for a store failure with `onStoreError: 'deny'`. */
  status: number
  /** The rate limit fields and `Retry-After`, by the option `headers`. */
  headers: Record<string, string>
  contentType: 'application/problem+json'
  /** The problem details: `problem()`'s for a refusal by a limit when it is given. */
  body: ProblemDetails
}

/**
 * The options every Tollgate HTTP adapter takes, with `Req` the framework's own request object
 * (Express `req`, Fastify `request`, Koa `ctx`). Checked once, at construction.
 */
export interface RateLimitOptions<Req> {
  /** A limiter to decide with; it stays yours to close. Give this, or `store`/`rules`, or inline `windows`. */
  limiter?: Limiter
  /** The store for a limiter made from `rules` or `windows`. @default new MemoryStore() */
  store?: Store
  /**
   * Rules for a limiter made here; `rule` names the one to apply. A `LiveRules` too: the limiter
   * made here follows it (closing the middleware stops that; the LiveRules stays open).
   */
  rules?: RulesOptions | LiveRules
  /**
   * The rule to apply, or the name given to inline `windows` (at most 128 characters). Or a
   * function of the request that names one of the limiter's rules (of `rules` or `limiter`), for
   * a limit per plan or tier: headers and problem bodies then speak of the rule it chose. A name
   * the limiter does not hold fails that request alone with a `TG_UNKNOWN_RULE` error naming the
   * rules it holds, through the framework's error handling (a 500 unless the app answers
   * otherwise), and charges nothing.
   * @default with inline windows, a name derived from them and the algorithm, e.g.
   * `'inline:sliding-log:100/1m'`: middlewares with the same windows share counts, others never do;
   * headers and problem bodies show each such window by what it admits (`100-in-1m`)
   * @example 'auth.createToken'
   * @example (req) => (req.user?.plan === 'pro' ? 'api.pro' : 'api.free')
   */
  rule?: string | ((request: Req) => MaybePromise<string>)
  /**
   * Inline windows: a rule of its own for this middleware. Without `rule` it is named after what
   * it counts, so two middlewares with the same windows and algorithm on one store count each
   * client once between them; give each its own `rule` to count them apart.
   * @example [{ limit: 100, period: '1m' }]
   */
  windows?: readonly WindowOptions[]
  /** The algorithm of inline `windows`. @default 'sliding-log' */
  algorithm?: AlgorithmName
  /**
   * Who the request counts for: one identifier or several, all charged in one atomic decision.
   * What a client can make unusable never fails the request (each case warns once, code
   * `TG_UNUSABLE_IDENTIFIER`): an entry that is not a non-empty string is left out, one longer than
   * 16,384 characters counts as its kind and a digest (`user:#<digest>`), and when nothing is left,
   * or `identify` throws a `TollgateArgumentError` (as `userIdentifier` does for an object), the
   * request counts for `client.ipIdentifier`. Any other error it throws fails the request.
   * @default the client IP identifier
   * @example (req, client) => [client.ipIdentifier, `user:${req.user.id}`]
   */
  identify?: (request: Req, client: ClientView) => MaybePromise<string | readonly string[]>
  /** The IPv6 prefix length that counts as one client. @default 56 */
  ipv6Subnet?: number
  /** Units the request costs, or a function of it (e.g. its body's bytes). @default 1 */
  cost?: number | ((request: Req) => MaybePromise<number>)
  /** Requests for which this returns true are not counted and get no headers. */
  skip?: (request: Req) => MaybePromise<boolean>
  /**
   * Which responses stay counted; the others get their charge back once the response has gone
   * (`limiter.refund`), so the next requests see it. `'failures'`: statuses of 400 and above,
   * and requests whose client went away before the answer (so aborting cannot dodge the count),
   * e.g. to count only failed logins. `'successes'`: statuses below 400. Or a function of the
   * outcome that returns true to keep the charge. Each request is charged when it arrives, as
   * always, so the limit still holds while it is answered; headers report that charge. A refund
   * that fails (the store down) or a function that throws leaves the charge, with a warning
   * (`TG_REFUND_FAILED`, once); it never fails a response.
   * @default every response counted
   * @example 'failures'
   * @example ({ status }) => status === 401 || status === 403
   */
  countOnly?: 'failures' | 'successes' | ((outcome: ResponseOutcome<Req>) => MaybePromise<boolean>)
  /**
   * The request's actual cost, known once its response is done (an LLM's tokens, a chunked
   * upload's bytes): the request is charged `cost` as an estimate when it arrives
   * (`limiter.reserve`), then the actual cost once the response has finished or the client went
   * away: the difference is given back when less, charged when more, whether it fits or not (debt
   * that later requests wait out). A function that throws or returns no non-negative integer, or
   * a store that fails, leaves the estimate charged, with a warning (`TG_SETTLE_FAILED`, once); it
   * never fails a response. Not with `countOnly` (return 0 to give a charge back). Needs a store
   * that charges over a limit (MemoryStore, RedisStore).
   * @default undefined (the cost charged when the request arrives is final)
   * @example (req, res) => res.locals.tokens
   */
  settle?: (request: Req, response: ObservedResponse) => MaybePromise<number>
  /**
   * Which rate limit header fields to send, or `false` for none (`Retry-After` is still sent on
   * refusals): `'draft-10'`, `'draft-8'` (the same fields, by express-rate-limit's name for them),
   * `'draft-7'`, `'draft-6'` or `'legacy'` (`X-RateLimit-*`).
   * @default 'draft-10'
   * @example 'draft-7'
   */
  headers?: HeadersFormat | false
  /** What `cost` counts, sent as draft-10 `qu` (`'concurrency'` is sent as `concurrent-requests`). @default 'request' */
  quotaUnit?: QuotaUnit
  /**
   * Adds draft-10 `pk` to `RateLimit` items: a keyed digest (HMAC-SHA-256) of the identifier.
   * `true` keys it with a secret drawn per process; give the same secret string (16+ characters)
   * to every server so that their `pk` values agree.
   * @default false
   */
  partitionKey?: boolean | string
  /** Called for every request a limit refuses (and every would-be refusal in `dryRun`), before the response; not for 503s after a store failure. */
  onLimited?: (request: Req, decision: Decision) => MaybePromise<void>
  /** Replaces the `application/problem+json` body of a refusal by a limit (429, or 413 for a cost that can never fit). */
  problem?: (decision: Decision, request: Req) => MaybePromise<ProblemDetails>
  /**
   * Builds the whole response to a refusal (by a limit, or by a store failure with
   * `onStoreError: 'deny'`: `decision.reason` tells), from the decision, the request and the
   * refusal Tollgate would send. Its headers are set over the rate limit fields, which stay
   * unless it names them. The adapters send it as it is.
   * @default the standard refusal: problem+json, 429 (413 when the cost can never fit) or 503
   * @example (decision, req, standard) => ({ ...standard, status: 503, headers: { 'Cache-Control': 'no-store' } })
   * @example () => ({ status: 429, contentType: 'text/html', body: '<p>Too many requests. Try again soon.</p>' })
   */
  refusal?: (decision: Decision, request: Req, standard: StandardRefusal) => MaybePromise<RefusalResponse>
  /** Count and report, never refuse; `false` enforces a rule in dry run. @default the rule's dryRun, else the limiter's (false) */
  dryRun?: boolean
  /** Fail open (`'allow'`) or closed (`'deny'`, answered 503) when the store fails. @default the limiter's, 'allow' */
  onStoreError?: StoreErrorPolicy
  /** The most one request waits for the store, in ms. @default the limiter's, 100 */
  storeTimeoutMs?: number
  /**
   * Receives one-time warnings, each with a code: `TG_UNTRUSTED_FORWARDED_FOR` and
   * `TG_FORWARDED_FOR_UNUSED` (`X-Forwarded-For` arrived, but the address decided on is the
   * connecting peer's), `TG_NO_CLIENT_ADDRESS`, `TG_UNPARSEABLE_CLIENT_ADDRESS`,
   * `TG_UNUSABLE_IDENTIFIER`, `TG_REFUND_FAILED` (`countOnly` could not give a charge back),
   * `TG_RULE_APPLIED_TWICE` (a second middleware applied this rule to a request this limiter had
   * charged already), `TG_LIMITER_PER_REQUEST` (a middleware made in the request handler, for
   * each request), and the limiter's own (`TG_RULE_NAME_CLASH`…).
   * @default process.emitWarning
   */
  onWarning?: WarningHandler
  /**
   * Warnings to leave out, by code (docs/errors.md): those of this middleware and of the limiter
   * it makes from `rules` or `windows` (a `limiter` given has its own `ignoreWarnings`). The others
   * still reach `onWarning`. A code it never emits is a `TG_CONFIG` error.
   * @default []
   * @example ['TG_UNTRUSTED_FORWARDED_FOR']
   */
  ignoreWarnings?: readonly RateLimitWarningCode[]
}

export const RATE_LIMIT_OPTION_KEYS: OptionKeys<RateLimitOptions<unknown>> = optionKeys<RateLimitOptions<unknown>>({
  limiter: true,
  store: true,
  rules: true,
  rule: true,
  windows: true,
  algorithm: true,
  identify: true,
  ipv6Subnet: true,
  cost: true,
  skip: true,
  countOnly: true,
  settle: true,
  headers: true,
  quotaUnit: true,
  partitionKey: true,
  onLimited: true,
  problem: true,
  refusal: true,
  dryRun: true,
  onStoreError: true,
  storeTimeoutMs: true,
  onWarning: true,
  ignoreWarnings: true,
})
