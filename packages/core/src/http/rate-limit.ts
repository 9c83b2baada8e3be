import { randomBytes } from 'node:crypto'
import { consumeNowOf, isThenable, promised } from '../limiter/consume-now.js'
import { createLimiter, type Limiter } from '../limiter/limiter.js'
import type { Decision } from '../rules/decision.js'
import type { WarningHandler } from '../rules/rules.js'
import { storeErrorPolicyOf } from '../rules/store-error-policy.js'
import type { DecisionOptions } from '../store-calls/decision-options.js'
import { storeTimeoutOf } from '../store-calls/store-wait.js'
import type { Store } from '../stores/store.js'
import { describeValue, TollgateConfigError, TollgateError } from '../support/errors.js'
import { MIDDLEWARE_FOREIGN_OPTIONS } from '../support/foreign-options.js'
import { checkOptionsObject, type OptionKeys } from '../support/option-objects.js'
import { processWarning } from '../support/process-warning.js'
import { appliedBefore, rememberApplied } from './applied-rules.js'
import { type AddressFallback, clientAddressIdentifier } from './client-address.js'
import { chargeSettler, countOnlyOf, type ObservedResponse } from './count-only.js'
import { HEADERS_FORMATS, type HeaderOptions, QUOTA_UNITS, rateLimitHeaders } from './headers.js'
import {
  overloadedProblem,
  type ProblemDetails,
  quotaExceededProblem,
  refusalStatus,
  storeUnavailableProblem,
} from './problem.js'
import {
  type ClientView,
  type MaybePromise,
  RATE_LIMIT_OPTION_KEYS,
  type RateLimitOptions,
  type RefusalResponse,
  type StandardRefusal,
} from './rate-limit-options.js'
import { serializedRefusal } from './refusal.js'
import { retryAfterSeconds } from './retry-after.js'
import { inlineRuleName, routeRuleName } from './rule-names.js'
import { type UnusableIdentifier, usableIdentifiers } from './usable-identifiers.js'

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
 * Builds the HTTP engine once per middleware or route: every option is checked here.
 * `adapterOptions` names the options an adapter takes itself and removes before these reach core
 * (Koa's `throw`), so that an unknown option's error lists them among the known ones.
 */
export function createRateLimit<Req>(
  options: RateLimitOptions<Req>,
  adapterOptions: readonly string[] = [],
): RateLimit<Req> {
  const raw: unknown = options
  checkOptionsObject(raw, knownOptions(adapterOptions), 'rate limit options', {
    foreign: MIDDLEWARE_FOREIGN_OPTIONS,
  })
  const onWarning = optionalFunction(options, 'onWarning') ?? processWarning
  const warnOnce = onceEach(onWarning)
  const identify = optionalFunction(options, 'identify')
  const skip = optionalFunction(options, 'skip')
  const onLimited = optionalFunction(options, 'onLimited')
  const problem = optionalFunction(options, 'problem')
  const refusal = optionalFunction(options, 'refusal')
  const countOnly = countOnlyOf(options.countOnly)
  const cost = options.cost ?? 1
  if (typeof cost !== 'function' && (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0)) {
    throw new TollgateConfigError(
      `option cost must be a non-negative integer or a function, got ${describeValue(cost)}`,
    )
  }
  const ipv6Subnet = options.ipv6Subnet ?? 56
  if (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw new TollgateConfigError(
      `option ipv6Subnet must be an integer from 1 to 128, got ${describeValue(ipv6Subnet)}`,
    )
  }
  const headerOptions = headerOptionsOf(options)
  // Given only when set, so that a rule's or the limiter's own dryRun applies otherwise.
  const { dryRun } = options
  if (dryRun !== undefined && typeof dryRun !== 'boolean')
    throw new TollgateConfigError(`option dryRun must be a boolean, got ${describeValue(dryRun)}`)
  const storeTimeout =
    options.storeTimeoutMs === undefined
      ? {}
      : { storeTimeoutMs: storeTimeoutOf(options.storeTimeoutMs, TollgateConfigError, 'option storeTimeoutMs') }
  const decisionDefaults: DecisionOptions = {
    ...(dryRun === undefined ? {} : { dryRun }),
    ...(options.onStoreError === undefined
      ? {}
      : { onStoreError: storeErrorPolicyOf(options.onStoreError, TollgateConfigError, 'option onStoreError') }),
    ...storeTimeout,
  }
  // One frozen object for every request when the cost is fixed: the limiter checks it once. None
  // at all when it would hold only the limiter's own default, a cost of 1: the limiter then
  // looks nothing up for it.
  const fixedCostOptions =
    typeof cost !== 'number' || (cost === 1 && Object.keys(decisionDefaults).length === 0)
      ? undefined
      : Object.freeze({ ...decisionDefaults, cost })
  // Last, once every other option is known good: it may start a store's timers.
  const { limiter, rule, owned } = limiterOf(options, onWarning)
  const onAddressFallback = (how: AddressFallback) =>
    warnOnce(how, ADDRESS_FALLBACK[how], 'TG_UNPARSEABLE_CLIENT_ADDRESS')
  const onUnusable = (why: UnusableIdentifier) => warnOnce(why, UNUSABLE_IDENTIFIER[why], 'TG_UNUSABLE_IDENTIFIER')
  const settleCharge = countOnly && chargeSettler(countOnly, limiter, storeTimeout, warnOnce)

  const consumeNow = consumeNowOf(limiter)

  // The steps of one check, each handing over to the next at once, or once the promise a
  // caller's function returned settles: with no such function and a store that decides in the
  // process, the whole check runs in one turn, with no promise at all (limiter/consume-now.ts).

  function checkNow(request: Req, view: RequestView): MaybePromise<RateLimitVerdict> {
    try {
      if (!skip) return ruled(request, view)
      const skipped = skip(request)
      if (isThenable(skipped))
        return Promise.resolve(skipped).then((yes) => (yes ? skipVerdict() : ruled(request, view)))
      return skipped ? skipVerdict() : ruled(request, view)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  function ruled(request: Req, view: RequestView): MaybePromise<RateLimitVerdict> {
    if (view.forwardedFor !== undefined) {
      if (!view.proxyTrusted) warnOnce('untrusted-proxy', UNTRUSTED_FORWARDED_FOR, 'TG_UNTRUSTED_FORWARDED_FOR')
      else if (view.ip !== undefined && view.ip === view.socketAddress)
        warnOnce('unused-forwarded-for', FORWARDED_FOR_UNUSED, 'TG_FORWARDED_FOR_UNUSED')
    }
    if (typeof rule === 'string') return identifiedFor(request, view, rule)
    const chosen = rule(request)
    if (isThenable(chosen))
      return Promise.resolve(chosen).then((name) => identifiedFor(request, view, chosenRule(name)))
    return identifiedFor(request, view, chosenRule(chosen))
  }

  function identifiedFor(request: Req, view: RequestView, ruleName: string): MaybePromise<RateLimitVerdict> {
    const ip = view.ip
    let ipIdentifier = NO_ADDRESS
    if (ip) ipIdentifier = clientAddressIdentifier(ip, ipv6Subnet, onAddressFallback)
    else if (!identify) warnOnce('no-address', NO_CLIENT_ADDRESS, 'TG_NO_CLIENT_ADDRESS')
    if (!identify) return appliedOnce(request, view, ruleName, ipIdentifier)
    const client: ClientView = { ip, ipIdentifier }
    let returned: unknown
    try {
      returned = identify(request, client)
    } catch (error) {
      return appliedOnce(request, view, ruleName, identifyFailed(error, client))
    }
    if (!isThenable(returned))
      return appliedOnce(request, view, ruleName, usableIdentifiers(returned, ipIdentifier, onUnusable))
    return Promise.resolve(returned).then(
      (value) => appliedOnce(request, view, ruleName, usableIdentifiers(value, ipIdentifier, onUnusable)),
      (error: unknown) => appliedOnce(request, view, ruleName, identifyFailed(error, client)),
    )
  }

  /** An `identify` that threw a TollgateArgumentError counts the request for its address; any other error fails it. */
  function identifyFailed(error: unknown, client: ClientView): string {
    // By code rather than class: an app may load core twice, as ESM and as CommonJS.
    if ((error as { code?: unknown } | null)?.code !== 'TG_INVALID_ARGUMENT') throw error
    warnOnce('identify-threw', `${UNUSABLE_IDENTIFIER.threw}: ${(error as Error).message}`, 'TG_UNUSABLE_IDENTIFIER')
    return client.ipIdentifier
  }

  /**
   * A rule this limiter already applied to the same request, for the same identifiers, answers
   * with that verdict: charged once, `onLimited` told once, a `countOnly` charge settled once.
   */
  function appliedOnce(
    request: Req,
    view: RequestView,
    ruleName: string,
    identifiers: string | readonly string[],
  ): MaybePromise<RateLimitVerdict> {
    const { response } = view
    if (response === undefined) return costed(request, view, ruleName, identifiers)
    const earlier = appliedBefore<MaybePromise<RateLimitVerdict>>(response, limiter, ruleName, identifiers)
    if (earlier !== undefined) {
      // Once per rule, not per route: a route's paths (`/users/1`, `/users/2`) are unbounded.
      warnOnce(`applied-twice ${ruleName}`, appliedTwice(ruleName, view), 'TG_RULE_APPLIED_TWICE')
      return earlier
    }
    // Remembered before the store answers, so that an application racing this one waits for it.
    const verdict = costed(request, view, ruleName, identifiers)
    rememberApplied(response, limiter, ruleName, identifiers, verdict)
    return verdict
  }

  function costed(
    request: Req,
    view: RequestView,
    ruleName: string,
    identifiers: string | readonly string[],
  ): MaybePromise<RateLimitVerdict> {
    if (typeof cost !== 'function') return consumed(request, view, ruleName, identifiers, fixedCostOptions)
    const units = cost(request)
    if (isThenable(units)) {
      return Promise.resolve(units).then((value) =>
        consumed(request, view, ruleName, identifiers, { ...decisionDefaults, cost: value }),
      )
    }
    return consumed(request, view, ruleName, identifiers, { ...decisionDefaults, cost: units })
  }

  function consumed(
    request: Req,
    view: RequestView,
    ruleName: string,
    identifiers: string | readonly string[],
    decisionOptions: DecisionOptions | undefined,
  ): MaybePromise<RateLimitVerdict> {
    const decision = consumeNow(ruleName, identifiers, decisionOptions)
    if (decision instanceof Promise) return decision.then((d) => decided(request, view, ruleName, identifiers, d))
    return decided(request, view, ruleName, identifiers, decision)
  }

  function decided(
    request: Req,
    view: RequestView,
    ruleName: string,
    identifiers: string | readonly string[],
    decision: Decision,
  ): MaybePromise<RateLimitVerdict> {
    const headers = headerOptions ? rateLimitHeaders(decision, headerOptions) : retryAfterOnly(decision)
    if (decision.reason === 'store-error-denied')
      return refuse(503, headers, storeUnavailableProblem(decision), decision, request)
    if (decision.reason === 'overloaded') return refuse(503, headers, overloadedProblem(decision), decision, request)
    // Refused by a limit, on the shared store or the local fallback, or would have been in a dry run.
    if (onLimited && (!decision.allowed || decision.reason === 'dry-run')) {
      const told = onLimited(request, decision)
      if (isThenable(told)) {
        return Promise.resolve(told).then(() => concluded(request, view, ruleName, identifiers, decision, headers))
      }
    }
    return concluded(request, view, ruleName, identifiers, decision, headers)
  }

  function concluded(
    request: Req,
    view: RequestView,
    ruleName: string,
    identifiers: string | readonly string[],
    decision: Decision,
    headers: Record<string, string>,
  ): MaybePromise<RateLimitVerdict> {
    if (decision.allowed) {
      // Only a charge the shared store took can be given back there: not a dry run's refusal,
      // a store failure's pass, or the local fallback's count.
      if (settleCharge && decision.reason === 'ok' && decision.cost > 0) {
        settleCharge(view.response, { request, rule: ruleName, identifiers, cost: decision.cost })
      }
      return { action: 'continue', headers, decision }
    }
    const status = refusalStatus(decision)
    if (!problem) return refuse(status, headers, quotaExceededProblem(decision), decision, request)
    const details = problem(decision, request)
    if (isThenable(details)) return Promise.resolve(details).then((d) => refuse(status, headers, d, decision, request))
    return refuse(status, headers, details, decision, request)
  }

  function chosenRule(name: unknown): string {
    if (typeof name === 'string' && limiter.rules.has(name)) return name
    throw new TollgateError(
      'TG_UNKNOWN_RULE',
      `option rule chose ${describeValue(name)}, which is not one of the limiter's rules: ${[...limiter.rules.keys()].join(', ')}`,
    )
  }

  function refuse(
    status: number,
    headers: Record<string, string>,
    problemDetails: ProblemDetails,
    decision: Decision,
    request: Req,
  ): MaybePromise<RateLimitVerdict> {
    if (!refusal) {
      return {
        action: 'respond',
        status,
        headers,
        contentType: PROBLEM_JSON,
        body: JSON.stringify(problemDetails),
        problem: problemDetails,
        decision,
      }
    }
    const standard: StandardRefusal = {
      status,
      headers: { ...headers },
      contentType: PROBLEM_JSON,
      body: problemDetails,
    }
    const verdictOf = (returned: RefusalResponse): RateLimitVerdict => ({
      action: 'respond',
      ...serializedRefusal(returned, headers),
      problem: problemDetails,
      decision,
    })
    const returned = refusal(decision, request, standard)
    return isThenable(returned) ? Promise.resolve(returned).then(verdictOf) : verdictOf(returned)
  }

  return {
    options,
    limiter,
    rule,
    checkNow,
    check: (request, view) => promised(checkNow(request, view)),
    close: () => (owned ? limiter.close() : Promise.resolve()),
  }
}

function skipVerdict(): RateLimitVerdict {
  return { action: 'continue', headers: {}, decision: undefined }
}

const PROBLEM_JSON = 'application/problem+json'

const NO_ADDRESS = 'ip:unknown'

const UNTRUSTED_FORWARDED_FOR =
  'X-Forwarded-For arrived but no proxy is trusted, so clients are told apart by the address of whatever connected (perhaps a proxy, counting all its clients as one); set your framework to trust your proxy, or ignore this if nothing sits in front'
const FORWARDED_FOR_UNUSED =
  "X-Forwarded-For arrived but the client address decided on is the connecting peer's: the framework's proxy setting does not trust the peer that sent it (Fastify 5 trusts no peer for a hop count such as trustProxy: 1), so every client behind that proxy counts as the proxy; trust the proxy's address instead, or ignore this if the header came from a client directly"
const NO_CLIENT_ADDRESS = `a request arrived without a client address; such requests share one identifier, ${NO_ADDRESS}`
const ADDRESS_FALLBACK: Readonly<Record<AddressFallback, string>> = {
  'port-removed':
    'a client address arrived with a port (as some load balancers append to X-Forwarded-For); it is counted without the port',
  digest:
    'a client address arrived that is not an IP address (a proxy may have sent X-Forwarded-For: unknown); such requests are counted under ip:#<digest of the text>, shared by every request with the same text',
}
const UNUSABLE_IDENTIFIER: Readonly<Record<UnusableIdentifier | 'threw', string>> = {
  'not-a-string':
    'identify returned something other than a non-empty string as an identifier; it is left out of the decision',
  'too-long':
    'identify returned an identifier longer than 16,384 characters; it is counted as its kind and a digest, such as user:#<digest>',
  none: "identify returned no usable identifier; the request is counted for the client's address",
  threw: "identify threw a TollgateArgumentError; the request is counted for the client's address",
}

/** Each warning once per engine: they describe the set-up, which one request shows as well as a million. */
function onceEach(onWarning: WarningHandler): (key: string, message: string, code: string) => void {
  const warned = new Set<string>()
  return (key, message, code) => {
    if (warned.has(key)) return
    warned.add(key)
    onWarning(message, code)
  }
}

/** The route as the path asked for: a query string may carry tokens, which have no place in a log. */
function appliedTwice(rule: string, { method, url }: RequestView): string {
  const path = url?.split('?', 1)[0]
  const route = path === undefined ? 'a request' : method === undefined ? path : `${method} ${path}`
  return `rule '${rule}' was applied twice to ${route} (two middlewares or hooks with the same limiter): the request is charged once, and the second answers with the first one's verdict, whatever options of its own it has; remove one of the two applications`
}

function knownOptions(adapterOptions: readonly string[]): OptionKeys<RateLimitOptions<unknown>> {
  return adapterOptions.length === 0 ? RATE_LIMIT_OPTION_KEYS : new Set([...RATE_LIMIT_OPTION_KEYS, ...adapterOptions])
}

const LIMITER_SOURCES = ['limiter', 'rules', 'windows', 'algorithm', 'rule', 'store'] as const

/**
 * The engine for one route of an app whose limit is `base`: the route's options override the
 * app's. A route naming only a `rule` decides with the app's limiter; a route with `windows` or
 * `rules` of its own gets a limiter of its own on the app's store (shared, never closed by the
 * route). `routeId` names a route's inline windows, e.g. `POST /upload`, so that every route's
 * keys differ and stay the same across restarts. When the app limits no route by itself, `base`
 * may be its options rather than an engine; each route then brings its own rule. A route id past
 * the bound on rule names is shortened to its start and a digest. `adapterOptions` is as for
 * `createRateLimit`.
 */
export function createRouteRateLimit<Req>(
  base: RateLimit<Req> | Partial<RateLimitOptions<Req>>,
  route: Partial<RateLimitOptions<Req>>,
  routeId?: string,
  adapterOptions: readonly string[] = [],
): RateLimit<Req> {
  const raw: unknown = route
  checkOptionsObject(raw, knownOptions(adapterOptions), 'route rate limit options', {
    foreign: MIDDLEWARE_FOREIGN_OPTIONS,
  })
  const engine = isEngine(base) ? base : undefined
  const inherited: Partial<RateLimitOptions<Req>> = { ...(engine ? engine.options : base) }
  for (const key of LIMITER_SOURCES) delete inherited[key]
  if (route.limiter) return createRateLimit({ ...inherited, ...route })
  if (route.windows || route.rules || !engine) {
    const rule = route.rule ?? (route.windows && routeId !== undefined ? routeRuleName(routeId) : undefined)
    if (route.windows && rule === undefined) {
      throw new TollgateConfigError(
        'a route with windows of its own needs option rule: a name that keeps its keys apart from other routes',
      )
    }
    const store = engine ? engine.limiter.store : (base as Partial<RateLimitOptions<Req>>).store
    return createRateLimit({ ...inherited, ...(store ? { store: sharedStore(store) } : {}), ...route, rule })
  }
  return createRateLimit({ ...inherited, limiter: engine.limiter, rule: engine.rule, ...route })
}

function isEngine<Req>(base: RateLimit<Req> | Partial<RateLimitOptions<Req>>): base is RateLimit<Req> {
  return typeof (base as RateLimit<Req>).check === 'function'
}

/** The app's store for a route's own limiter: closing the route must not close the app's store. */
function sharedStore(store: Store): Store {
  const shared: Store = {
    evaluate: (request) => store.evaluate(request),
    reset: (targets) => store.reset(targets),
    close: () => Promise.resolve(),
  }
  const evaluateSync = store.evaluateSync?.bind(store)
  if (evaluateSync) shared.evaluateSync = evaluateSync
  const evaluateInto = store.evaluateInto?.bind(store)
  if (evaluateInto) shared.evaluateInto = evaluateInto
  const recentError = store.recentError?.bind(store)
  if (recentError) shared.recentError = recentError
  return shared
}

function retryAfterOnly(decision: Decision): Record<string, string> {
  const seconds = retryAfterSeconds(decision)
  return seconds === undefined ? {} : { 'Retry-After': String(seconds) }
}

function limiterOf<Req>(options: RateLimitOptions<Req>, onWarning: (message: string, code: string) => void) {
  const { limiter, store, rules, windows, algorithm } = options
  const rule = options.rule ?? (windows ? inlineRuleName(windows, algorithm) : undefined)
  if (rule !== undefined && typeof rule !== 'function' && (typeof rule !== 'string' || rule.length === 0)) {
    throw new TollgateConfigError(
      `option rule must be a rule name or a function of the request naming one, got ${describeValue(rule)}`,
    )
  }
  const sources = [limiter && 'limiter', rules && 'rules', windows && 'windows'].filter(Boolean)
  if (sources.length !== 1) {
    throw new TollgateConfigError(
      sources.length === 0
        ? 'rate limit options need a rule: give windows (e.g. [{ limit: 100, period: "1m" }]), or rules and rule, or a limiter and rule'
        : `rate limit options take one of limiter, rules or windows, got ${sources.join(' and ')}`,
    )
  }
  if (algorithm !== undefined && !windows) throw new TollgateConfigError('option algorithm goes with inline windows')
  if (typeof rule === 'function' && windows) {
    throw new TollgateConfigError(
      'option rule as a function chooses among rules: give it rules or a limiter holding them, not inline windows',
    )
  }
  if (limiter) {
    if (store) throw new TollgateConfigError('option store goes with rules or windows; a limiter has its own store')
    if (typeof limiter.consume !== 'function')
      throw new TollgateConfigError(`option limiter must be a Limiter, got ${describeValue(limiter)}`)
    return { limiter, rule: ruleIn(limiter, rule), owned: false }
  }
  const made = createLimiter({
    ...(store ? { store } : {}),
    rules: rules ?? { [rule as string]: { windows: windows ?? [], ...(algorithm ? { algorithm } : {}) } },
    onWarning,
  })
  return { limiter: made, rule: ruleIn(made, rule), owned: true }
}

function ruleIn<R extends string | ((...args: never[]) => unknown)>(limiter: Limiter, rule: R | undefined): R {
  if (rule === undefined) {
    throw new TollgateConfigError(
      `option rule must name one of the limiter's rules: ${[...limiter.rules.keys()].join(', ')}`,
    )
  }
  if (typeof rule === 'string' && !limiter.rules.has(rule)) {
    throw new TollgateConfigError(
      `option rule ${describeValue(rule)} is not one of the limiter's rules: ${[...limiter.rules.keys()].join(', ')}`,
    )
  }
  return rule
}

/** Per process unless the app sets one: `pk` values then differ between servers, but never reveal identifiers. */
const PROCESS_PARTITION_SECRET = randomBytes(32).toString('base64')

function headerOptionsOf<Req>(options: RateLimitOptions<Req>): HeaderOptions | undefined {
  const { headers = 'draft-10', quotaUnit = 'request', partitionKey = false } = options
  if (headers !== false && !HEADERS_FORMATS.includes(headers)) {
    throw new TollgateConfigError(
      `option headers must be ${HEADERS_FORMATS.map((f) => `'${f}'`).join(', ')} or false, got ${describeValue(headers)}`,
    )
  }
  if (!QUOTA_UNITS.includes(quotaUnit)) {
    throw new TollgateConfigError(
      `option quotaUnit must be ${QUOTA_UNITS.map((u) => `'${u}'`).join(', ')}, got ${describeValue(quotaUnit)}`,
    )
  }
  if (typeof partitionKey !== 'boolean' && (typeof partitionKey !== 'string' || partitionKey.length < 16)) {
    throw new TollgateConfigError(
      `option partitionKey must be a boolean or a secret of at least 16 characters, got ${describeValue(partitionKey)}`,
    )
  }
  const partitionKeySecret = partitionKey === true ? PROCESS_PARTITION_SECRET : partitionKey || undefined
  return headers === false ? undefined : { format: headers, quotaUnit, partitionKeySecret }
}

function optionalFunction<Req, K extends keyof RateLimitOptions<Req>>(
  options: RateLimitOptions<Req>,
  key: K,
): Extract<RateLimitOptions<Req>[K], (...args: never[]) => unknown> | undefined {
  const value = options[key]
  if (value !== undefined && typeof value !== 'function') {
    throw new TollgateConfigError(`option ${String(key)} must be a function, got ${describeValue(value)}`)
  }
  return value as Extract<RateLimitOptions<Req>[K], (...args: never[]) => unknown> | undefined
}
