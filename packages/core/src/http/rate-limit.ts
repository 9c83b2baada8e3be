import { randomBytes } from 'node:crypto'
import type { Decision } from '../decision.js'
import { describeValue, TollgateConfigError } from '../errors.js'
import { ipIdentifier } from '../identifiers/ip.js'
import { createLimiter, type DecisionOptions, type Limiter } from '../limiter.js'
import { isPlainObject, rejectUnknownKeys } from '../rules.js'
import { storeErrorPolicyOf, storeTimeoutOf } from '../store-failure.js'
import type { Store } from '../stores/store.js'
import { HEADERS_FORMATS, type HeaderOptions, QUOTA_UNITS, rateLimitHeaders } from './headers.js'
import { type ProblemDetails, quotaExceededProblem, storeUnavailableProblem } from './problem.js'
import { type ClientView, RATE_LIMIT_OPTION_KEYS, type RateLimitOptions } from './rate-limit-options.js'
import { retryAfterSeconds } from './retry-after.js'

/** What the adapter tells the engine about a request, beyond the request object itself. */
export interface RequestView {
  /** The client address, honouring the framework's proxy trust. */
  ip: string | undefined
  /** The raw `X-Forwarded-For` header, only to warn when it arrives untrusted. */
  forwardedFor: string | string[] | undefined
  /** Whether the framework is set to trust a proxy. */
  proxyTrusted: boolean
}

/**
 * The engine's answer: headers to set in every case, and either `continue` to the handler or a
 * complete response (status, content type, serialized body) to send instead.
 */
export type RateLimitVerdict =
  | { action: 'continue'; headers: Record<string, string>; decision: Decision | undefined }
  | {
      action: 'respond'
      status: 429 | 503
      headers: Record<string, string>
      contentType: 'application/problem+json'
      body: string
      problem: ProblemDetails
      decision: Decision
    }

export interface RateLimit<Req> {
  /** The options this engine was built from, as given. */
  readonly options: RateLimitOptions<Req>
  /** The limiter deciding: the one given, or the one made from `rules`/`windows`. */
  readonly limiter: Limiter
  /** The rule applied. */
  readonly rule: string
  /** Decides for one request. Never rejects for a store failure; rejects for a failing `identify`, `cost` or `skip`. */
  check(request: Req, view: RequestView): Promise<RateLimitVerdict>
  /** Closes the limiter if it was made here; a limiter passed in stays open. */
  close(): Promise<void>
}

const emitWarning = (message: string, code: string) => process.emitWarning(message, { code })

/** Builds the HTTP engine once per middleware or route: every option is checked here. */
export function createRateLimit<Req>(options: RateLimitOptions<Req>): RateLimit<Req> {
  const raw: unknown = options
  if (!isPlainObject(raw))
    throw new TollgateConfigError(`rate limit options must be an object, got ${describeValue(raw)}`)
  rejectUnknownKeys(raw, RATE_LIMIT_OPTION_KEYS, 'rate limit options')
  const onWarning = optionalFunction(options, 'onWarning') ?? emitWarning
  const identify = optionalFunction(options, 'identify')
  const skip = optionalFunction(options, 'skip')
  const onLimited = optionalFunction(options, 'onLimited')
  const problem = optionalFunction(options, 'problem')
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
  const dryRun = options.dryRun ?? false
  if (typeof dryRun !== 'boolean')
    throw new TollgateConfigError(`option dryRun must be a boolean, got ${describeValue(dryRun)}`)
  const decisionDefaults: DecisionOptions = {
    dryRun,
    ...(options.onStoreError === undefined
      ? {}
      : { onStoreError: storeErrorPolicyOf(options.onStoreError, TollgateConfigError, 'option onStoreError') }),
    ...(options.storeTimeoutMs === undefined
      ? {}
      : { storeTimeoutMs: storeTimeoutOf(options.storeTimeoutMs, TollgateConfigError, 'option storeTimeoutMs') }),
  }
  // One frozen object for every request when the cost is fixed: the limiter checks it once.
  const fixedCostOptions = typeof cost === 'number' ? Object.freeze({ ...decisionDefaults, cost }) : undefined
  // Last, once every other option is known good: it may start a store's timers.
  const { limiter, rule, owned } = limiterOf(options, onWarning)
  let warnedAboutProxy = false
  let warnedAboutAddress = false

  return {
    options,
    limiter,
    rule,
    async check(request, view) {
      if (skip && (await skip(request))) return { action: 'continue', headers: {}, decision: undefined }
      if (!warnedAboutProxy && view.forwardedFor !== undefined && !view.proxyTrusted) {
        warnedAboutProxy = true
        onWarning(
          'X-Forwarded-For arrived but no proxy is trusted, so clients are told apart by the address of whatever connected (perhaps a proxy, counting all its clients as one); set your framework to trust your proxy, or ignore this if nothing sits in front',
          'TG_UNTRUSTED_FORWARDED_FOR',
        )
      }
      const client: ClientView = {
        ip: view.ip,
        ipIdentifier: view.ip ? ipIdentifier(view.ip, { ipv6Subnet }) : undefined,
      }
      if (!client.ipIdentifier && !identify && !warnedAboutAddress) {
        warnedAboutAddress = true
        onWarning(
          'a request arrived without a client address; such requests share one identifier, ip:unknown',
          'TG_NO_CLIENT_ADDRESS',
        )
      }
      const identifiers = identify ? await identify(request, client) : (client.ipIdentifier ?? 'ip:unknown')
      const decision = await limiter.consume(
        rule,
        identifiers,
        typeof cost === 'function' ? { ...decisionDefaults, cost: await cost(request) } : fixedCostOptions,
      )
      const headers = headerOptions ? rateLimitHeaders(decision, headerOptions) : retryAfterOnly(decision)
      if (decision.reason === 'store-error-denied')
        return respond(503, headers, storeUnavailableProblem(decision), decision)
      // Refused by a limit, on the shared store or the local fallback, or would have been in a dry run.
      if (!decision.allowed || decision.reason === 'dry-run') await onLimited?.(request, decision)
      if (decision.allowed) return { action: 'continue', headers, decision }
      return respond(
        429,
        headers,
        problem ? await problem(decision, request) : quotaExceededProblem(decision),
        decision,
      )
    },
    close: () => (owned ? limiter.close() : Promise.resolve()),
  }
}

const LIMITER_SOURCES = ['limiter', 'rules', 'windows', 'algorithm', 'rule', 'store'] as const

/**
 * The engine for one route of an app whose limit is `base`: the route's options override the
 * app's. A route naming only a `rule` decides with the app's limiter; a route with `windows` or
 * `rules` of its own gets a limiter of its own on the app's store (shared, never closed by the
 * route). `routeId` names a route's inline windows, e.g. `POST /upload`, so that every route's
 * keys differ and stay the same across restarts. When the app limits no route by itself, `base`
 * may be its options rather than an engine; each route then brings its own rule.
 */
export function createRouteRateLimit<Req>(
  base: RateLimit<Req> | Partial<RateLimitOptions<Req>>,
  route: Partial<RateLimitOptions<Req>>,
  routeId?: string,
): RateLimit<Req> {
  const raw: unknown = route
  if (!isPlainObject(raw))
    throw new TollgateConfigError(`route rate limit options must be an object, got ${describeValue(raw)}`)
  rejectUnknownKeys(raw, RATE_LIMIT_OPTION_KEYS, 'route rate limit options')
  const engine = isEngine(base) ? base : undefined
  const inherited: Partial<RateLimitOptions<Req>> = { ...(engine ? engine.options : base) }
  for (const key of LIMITER_SOURCES) delete inherited[key]
  if (route.limiter) return createRateLimit({ ...inherited, ...route })
  if (route.windows || route.rules || !engine) {
    const rule = route.rule ?? (route.windows ? routeId : undefined)
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

function respond(
  status: 429 | 503,
  headers: Record<string, string>,
  problem: ProblemDetails,
  decision: Decision,
): RateLimitVerdict {
  return {
    action: 'respond',
    status,
    headers,
    contentType: 'application/problem+json',
    body: JSON.stringify(problem),
    problem,
    decision,
  }
}

function limiterOf<Req>(options: RateLimitOptions<Req>, onWarning: (message: string, code: string) => void) {
  const { limiter, store, rules, windows, algorithm } = options
  const rule = options.rule ?? (windows ? 'default' : undefined)
  if (rule !== undefined && (typeof rule !== 'string' || rule.length === 0)) {
    throw new TollgateConfigError(`option rule must be a rule name, got ${describeValue(rule)}`)
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

function ruleIn(limiter: Limiter, rule: string | undefined): string {
  if (rule === undefined) {
    throw new TollgateConfigError(
      `option rule must name one of the limiter's rules: ${[...limiter.rules.keys()].join(', ')}`,
    )
  }
  if (!limiter.rules.has(rule)) {
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
