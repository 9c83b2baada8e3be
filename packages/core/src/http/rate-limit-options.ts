import type { Decision } from '../decision.js'
import type { Limiter } from '../limiter.js'
import type { AlgorithmName, RulesOptions, WarningHandler, WindowOptions } from '../rules.js'
import type { StoreErrorPolicy } from '../store-error-policy.js'
import type { Store } from '../stores/store.js'
import type { HeadersFormat, QuotaUnit } from './headers.js'
import type { ProblemDetails } from './problem.js'

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

type MaybePromise<T> = T | Promise<T>

/**
 * The options every Tollgate HTTP adapter takes, with `Req` the framework's own request object
 * (Express `req`, Fastify `request`, Koa `ctx`). Checked once, at construction.
 */
export interface RateLimitOptions<Req> {
  /** A limiter to decide with; it stays yours to close. Give this, or `store`/`rules`, or inline `windows`. */
  limiter?: Limiter
  /** The store for a limiter made from `rules` or `windows`. @default new MemoryStore() */
  store?: Store
  /** Rules for a limiter made here; `rule` names the one to apply. */
  rules?: RulesOptions
  /**
   * The rule to apply, or the name given to inline `windows` (at most 128 characters).
   * @default with inline windows, a name derived from them and the algorithm, e.g.
   * `'inline:sliding-log:100/1m'`: middlewares with the same windows share counts, others never do
   * @example 'auth.createToken'
   */
  rule?: string
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
  /** Which rate limit header fields to send, or `false` for none (`Retry-After` is still sent on refusals). @default 'draft-10' */
  headers?: HeadersFormat | false
  /** What `cost` counts, sent as draft-10 `qu`. @default 'request' */
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
  /** Replaces the 429 `application/problem+json` body. */
  problem?: (decision: Decision, request: Req) => MaybePromise<ProblemDetails>
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
   * `TG_UNUSABLE_IDENTIFIER`, and the limiter's own.
   * @default process.emitWarning
   */
  onWarning?: WarningHandler
}

export const RATE_LIMIT_OPTION_KEYS: ReadonlySet<string> = new Set([
  'limiter',
  'store',
  'rules',
  'rule',
  'windows',
  'algorithm',
  'identify',
  'ipv6Subnet',
  'cost',
  'skip',
  'headers',
  'quotaUnit',
  'partitionKey',
  'onLimited',
  'problem',
  'dryRun',
  'onStoreError',
  'storeTimeoutMs',
  'onWarning',
])
