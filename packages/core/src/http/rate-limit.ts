import { consumeNowOf, isThenable, promised } from '../limiter/consume-now.js'
import type { Limiter } from '../limiter/limiter.js'
import type { Reservation } from '../limiter/reservation.js'
import type { Decision } from '../rules/decision.js'
import type { DecisionOptions } from '../store-calls/decision-options.js'
import { describeValue, TollgateError } from '../support/errors.js'
import { appliedBefore, rememberApplied } from './applied-rules.js'
import { clientAddressIdentifier } from './client-address.js'
import { type EngineConfig, engineConfigOf } from './engine-config.js'
import { rateLimitHeaders } from './headers.js'
import { type RequestWatch, watchFirstRequest } from './made-per-request.js'
import type { ObservedResponse } from './observed-response.js'
import {
  overloadedProblem,
  type ProblemDetails,
  quotaExceededProblem,
  refusalStatus,
  storeUnavailableProblem,
} from './problem.js'
import type {
  ClientView,
  MaybePromise,
  RateLimitOptions,
  RefusalResponse,
  StandardRefusal,
} from './rate-limit-options.js'
import { serializedRefusal } from './refusal.js'
import { retryAfterSeconds } from './retry-after.js'
import { usableIdentifiers } from './usable-identifiers.js'
import {
  appliedTwice,
  FORWARDED_FOR_UNUSED,
  LIMITER_PER_REQUEST,
  NO_ADDRESS,
  NO_CLIENT_ADDRESS,
  UNTRUSTED_FORWARDED_FOR,
  UNUSABLE_IDENTIFIER,
} from './warnings.js'

/** What the adapter tells the engine about a request, beyond the request object itself. */
export interface RequestView {
  /** The client address, honouring the framework's proxy trust. */
  ip: string | undefined
  /** The raw `X-Forwarded-For` header, only to warn when it arrives but does not decide the address. */
  forwardedFor: string | string[] | undefined
  /** Whether the framework is set to trust a proxy. */
  proxyTrusted: boolean
  /**
   * The address of the connecting peer (`socket.remoteAddress`): when `ip` is this one although
   * `X-Forwarded-For` arrived, the proxy's setting let every client behind it count as the proxy.
   */
  socketAddress?: string | undefined
  /**
   * The Node response the framework answers through (Express `res`, Fastify `reply.raw`, Koa
   * `ctx.res`): watched for its status when `countOnly` is set, and standing for the request, so
   * that a rule of one limiter applied to it twice charges it once. Without it every response
   * counts, and every application charges.
   */
  response?: ObservedResponse | undefined
  /** The request's method, to name its route in a warning. */
  method?: string | undefined
  /**
   * The URL the client asked for, before any router rewrote it (Express `originalUrl`, Fastify
   * `request.url`, Koa `ctx.originalUrl`), to name its route in a warning, without the query.
   */
  url?: string | undefined
}

/**
 * The engine's answer: headers to set in every case, and either `continue` to the handler or a
 * complete response (status, content type, serialized body) to send instead.
 */
export type RateLimitVerdict =
  | { action: 'continue'; headers: Record<string, string>; decision: Decision | undefined }
  | {
      action: 'respond'
      /** 429, 413 for a cost that can never fit, 503 for a store failure; or what `refusal` returned. */
      status: number
      headers: Record<string, string>
      /** `application/problem+json` unless `refusal` says otherwise. */
      contentType: string
      body: string | Buffer
      /** The problem details of the standard refusal, whatever `refusal` sends instead. */
      problem: ProblemDetails
      decision: Decision
    }

export interface RateLimit<Req> {
  /** The options this engine was built from, as given. */
  readonly options: RateLimitOptions<Req>
  /** The limiter deciding: the one given, or the one made from `rules`/`windows`. */
  readonly limiter: Limiter
  /** The rule applied, or the function that names it per request. */
  readonly rule: string | ((request: Req) => MaybePromise<string>)
  /**
   * Decides for one request. Never rejects for a store failure; rejects for a failing `rule`,
   * `identify`, `cost`, `skip`, `onLimited`, `problem` or `refusal`.
   */
  check(request: Req, view: RequestView): Promise<RateLimitVerdict>
  /**
   * `check` as the adapters call it: a verdict reached in the process, with no function of the
   * options returning a promise, comes back as it is, so that the adapter answers the request in
   * the same turn; any other in a promise. Never throws: failures reject, as from `check`.
   */
  checkNow(request: Req, view: RequestView): MaybePromise<RateLimitVerdict>
  /** Closes the limiter if it was made here; a limiter passed in stays open. */
  close(): Promise<void>
}

/**
 * Builds the HTTP engine once per middleware or route: every option is checked here
 * (`engine-config.ts`). `adapterOptions` names the options an adapter takes itself and removes
 * before these reach core (Koa's `throw`), so that an unknown option's error lists them among
 * the known ones.
 */
export function createRateLimit<Req>(
  options: RateLimitOptions<Req>,
  adapterOptions: readonly string[] = [],
): RateLimit<Req> {
  const config = engineConfigOf(options, adapterOptions)
  const { limiter, rule, owned, warnOnce, ignoredWarnings } = config
  const firstRequest = ignoredWarnings.has('TG_LIMITER_PER_REQUEST')
    ? undefined
    : watchFirstRequest(rule, () => warnOnce('per-request', LIMITER_PER_REQUEST, 'TG_LIMITER_PER_REQUEST'))
  const engine = new HttpEngine(config, firstRequest?.watch)
  const checkNow = (request: Req, view: RequestView) => engine.checkNow(request, view)
  return {
    options,
    limiter,
    rule,
    checkNow,
    check: (request, view) => promised(checkNow(request, view)),
    close: () => {
      firstRequest?.closed()
      return owned ? limiter.close() : Promise.resolve()
    },
  }
}

/** One request's check as it goes through the engine's steps, each filling in what it found. */
interface RequestCheck<Req> {
  readonly request: Req
  readonly view: RequestView
  rule: string
  identifiers: string | readonly string[]
  decision: Decision
  headers: Record<string, string>
  /** With `settle`: what the request's estimate was charged as, to settle once the response is done. */
  reservation?: Reservation
}

/**
 * A request's check, top to bottom: skip → rule → identifiers → applied once → cost → decision →
 * `onLimited` → verdict (continue, or a refusal). Each step hands over to the next at once, or once
 * the promise a caller's function returned settles: with no such function and a store that
 * decides in the process, the whole check runs in one turn, with no promise at all
 * (limiter/consume-now.ts).
 */
class HttpEngine<Req> {
  private readonly consumeNow: ReturnType<typeof consumeNowOf>

  constructor(
    private readonly config: EngineConfig<Req>,
    /** Looks at the first requests for a middleware made per request (made-per-request.ts); undefined once done. */
    private watch: RequestWatch | undefined,
  ) {
    this.consumeNow = consumeNowOf(config.limiter)
  }

  checkNow(request: Req, view: RequestView): MaybePromise<RateLimitVerdict> {
    try {
      if (this.watch !== undefined) this.watch = this.watch(request)
      const { skip } = this.config
      if (!skip) return this.chooseRule(request, view)
      const skipped = skip(request)
      if (isThenable(skipped))
        return Promise.resolve(skipped).then((yes) => (yes ? skipVerdict() : this.chooseRule(request, view)))
      return skipped ? skipVerdict() : this.chooseRule(request, view)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  private chooseRule(request: Req, view: RequestView): MaybePromise<RateLimitVerdict> {
    const { warnOnce, rule } = this.config
    if (view.forwardedFor !== undefined) {
      if (!view.proxyTrusted) warnOnce('untrusted-proxy', UNTRUSTED_FORWARDED_FOR, 'TG_UNTRUSTED_FORWARDED_FOR')
      else if (view.ip !== undefined && view.ip === view.socketAddress)
        warnOnce('unused-forwarded-for', FORWARDED_FOR_UNUSED, 'TG_FORWARDED_FOR_UNUSED')
    }
    const check = { request, view, rule: '', identifiers: '', decision: NO_DECISION, headers: NO_HEADERS }
    if (typeof rule === 'string') {
      check.rule = rule
      return this.identify(check)
    }
    const chosen = rule(request)
    if (isThenable(chosen))
      return Promise.resolve(chosen).then((name) => {
        check.rule = this.ruleNamed(name)
        return this.identify(check)
      })
    check.rule = this.ruleNamed(chosen)
    return this.identify(check)
  }

  private identify(check: RequestCheck<Req>): MaybePromise<RateLimitVerdict> {
    const { identify, ipv6Subnet, warnOnce, onAddressFallback, onUnusable } = this.config
    const { ip } = check.view
    let ipIdentifier = NO_ADDRESS
    if (ip) ipIdentifier = clientAddressIdentifier(ip, ipv6Subnet, onAddressFallback)
    else if (!identify) warnOnce('no-address', NO_CLIENT_ADDRESS, 'TG_NO_CLIENT_ADDRESS')
    if (!identify) return this.appliedOnce(check, ipIdentifier)
    const client: ClientView = { ip, ipIdentifier }
    let returned: unknown
    try {
      returned = identify(check.request, client)
    } catch (error) {
      return this.appliedOnce(check, this.identifyFailed(error, client))
    }
    if (!isThenable(returned)) return this.appliedOnce(check, usableIdentifiers(returned, ipIdentifier, onUnusable))
    return Promise.resolve(returned).then(
      (value) => this.appliedOnce(check, usableIdentifiers(value, ipIdentifier, onUnusable)),
      (error: unknown) => this.appliedOnce(check, this.identifyFailed(error, client)),
    )
  }

  /** An `identify` that threw a TollgateArgumentError counts the request for its address; any other error fails it. */
  private identifyFailed(error: unknown, client: ClientView): string {
    // By code rather than class: an app may load core twice, as ESM and as CommonJS.
    if ((error as { code?: unknown } | null)?.code !== 'TG_INVALID_ARGUMENT') throw error
    const message = `${UNUSABLE_IDENTIFIER.threw}: ${(error as Error).message}`
    this.config.warnOnce('identify-threw', message, 'TG_UNUSABLE_IDENTIFIER')
    return client.ipIdentifier
  }

  /**
   * A rule this limiter already applied to the same request, for the same identifiers, answers
   * with that verdict: charged once, `onLimited` told once, a `countOnly` charge settled once.
   */
  private appliedOnce(
    check: RequestCheck<Req>,
    identifiers: string | readonly string[],
  ): MaybePromise<RateLimitVerdict> {
    check.identifiers = identifiers
    const { response } = check.view
    if (response === undefined) return this.costed(check)
    const { limiter, warnOnce } = this.config
    const earlier = appliedBefore<MaybePromise<RateLimitVerdict>>(response, limiter, check.rule, identifiers)
    if (earlier !== undefined) {
      // Once per rule, not per route: a route's paths (`/users/1`, `/users/2`) are unbounded.
      warnOnce(`applied-twice ${check.rule}`, appliedTwice(check.rule, check.view), 'TG_RULE_APPLIED_TWICE')
      return earlier
    }
    // Remembered before the store answers, so that an application racing this one waits for it.
    const verdict = this.costed(check)
    rememberApplied(response, limiter, check.rule, identifiers, verdict)
    return verdict
  }

  private costed(check: RequestCheck<Req>): MaybePromise<RateLimitVerdict> {
    const { cost, fixedCostOptions, decisionDefaults } = this.config
    if (typeof cost !== 'function') return this.consumed(check, fixedCostOptions)
    const units = cost(check.request)
    if (isThenable(units)) {
      return Promise.resolve(units).then((value) => this.consumed(check, { ...decisionDefaults, cost: value }))
    }
    return this.consumed(check, { ...decisionDefaults, cost: units })
  }

  private consumed(check: RequestCheck<Req>, options: DecisionOptions | undefined): MaybePromise<RateLimitVerdict> {
    if (this.config.settleCost !== undefined) {
      return this.config.limiter.reserve(check.rule, check.identifiers, options).then((reservation) => {
        check.reservation = reservation
        return this.decided(check, reservation.decision)
      })
    }
    const decision = this.consumeNow(check.rule, check.identifiers, options)
    if (decision instanceof Promise) return decision.then((decided) => this.decided(check, decided))
    return this.decided(check, decision)
  }

  private decided(check: RequestCheck<Req>, decision: Decision): MaybePromise<RateLimitVerdict> {
    const { headerOptions, onLimited } = this.config
    check.decision = decision
    check.headers = headerOptions ? rateLimitHeaders(decision, headerOptions) : retryAfterOnly(decision)
    if (decision.reason === 'store-error-denied') return this.refuse(check, 503, storeUnavailableProblem(decision))
    if (decision.reason === 'overloaded') return this.refuse(check, 503, overloadedProblem(decision))
    // Refused by a limit, on the shared store or the local fallback, or would have been in a dry run.
    if (onLimited && (!decision.allowed || decision.reason === 'dry-run')) {
      const told = onLimited(check.request, decision)
      if (isThenable(told)) return Promise.resolve(told).then(() => this.concluded(check))
    }
    return this.concluded(check)
  }

  private concluded(check: RequestCheck<Req>): MaybePromise<RateLimitVerdict> {
    const { decision, headers } = check
    if (decision.allowed) {
      const { settleCharge } = this.config
      // Only a charge the shared store took can be given back there: not a dry run's refusal,
      // a store failure's pass, or the local fallback's count.
      if (settleCharge && decision.reason === 'ok' && decision.cost > 0) {
        const { request, rule, identifiers } = check
        settleCharge(check.view.response, { request, rule, identifiers, cost: decision.cost })
      }
      const { settleCost } = this.config
      if (settleCost && check.reservation && decision.reason === 'ok') {
        settleCost(check.view.response, check.request, check.reservation)
      }
      return { action: 'continue', headers, decision }
    }
    const status = refusalStatus(decision)
    const { problem } = this.config
    if (!problem) return this.refuse(check, status, quotaExceededProblem(decision))
    const details = problem(decision, check.request)
    if (isThenable(details)) return Promise.resolve(details).then((d) => this.refuse(check, status, d))
    return this.refuse(check, status, details)
  }

  private refuse(check: RequestCheck<Req>, status: number, problem: ProblemDetails): MaybePromise<RateLimitVerdict> {
    const { decision, headers } = check
    const { refusal } = this.config
    if (!refusal) {
      const body = JSON.stringify(problem)
      return { action: 'respond', status, headers, contentType: PROBLEM_JSON, body, problem, decision }
    }
    const standard: StandardRefusal = { status, headers: { ...headers }, contentType: PROBLEM_JSON, body: problem }
    const verdictOf = (returned: RefusalResponse): RateLimitVerdict => ({
      action: 'respond',
      ...serializedRefusal(returned, headers),
      problem,
      decision,
    })
    const returned = refusal(decision, check.request, standard)
    return isThenable(returned) ? Promise.resolve(returned).then(verdictOf) : verdictOf(returned)
  }

  private ruleNamed(name: unknown): string {
    const { rules } = this.config.limiter
    if (typeof name === 'string' && rules.has(name)) return name
    throw new TollgateError(
      'TG_UNKNOWN_RULE',
      `option rule chose ${describeValue(name)}, which is not one of the limiter's rules: ${[...rules.keys()].join(', ')}`,
    )
  }
}

const PROBLEM_JSON = 'application/problem+json'
/** What a check holds before its decision: never read before `decided` fills it in. */
const NO_DECISION = undefined as unknown as Decision
const NO_HEADERS: Record<string, string> = {}

function skipVerdict(): RateLimitVerdict {
  return { action: 'continue', headers: {}, decision: undefined }
}

function retryAfterOnly(decision: Decision): Record<string, string> {
  const seconds = retryAfterSeconds(decision)
  return seconds === undefined ? {} : { 'Retry-After': String(seconds) }
}
