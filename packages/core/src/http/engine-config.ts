import { randomBytes } from 'node:crypto'
import { createLimiter, type Limiter } from '../limiter/limiter.js'
import type { Reservation } from '../limiter/reservation.js'
import type { WarningHandler } from '../rules/rules.js'
import { storeErrorPolicyOf } from '../rules/store-error-policy.js'
import type { DecisionOptions } from '../store-calls/decision-options.js'
import { storeTimeoutOf } from '../store-calls/store-wait.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { MIDDLEWARE_FOREIGN_OPTIONS } from '../support/foreign-options.js'
import { ignoredWarningsOf, withoutIgnored } from '../support/ignored-warnings.js'
import { checkOptionsObject, type OptionKeys } from '../support/option-objects.js'
import { processWarning } from '../support/process-warning.js'
import type { AddressFallback } from './client-address.js'
import { type Charge, chargeSettler, countOnlyOf } from './count-only.js'
import { HEADERS_FORMATS, type HeaderOptions, QUOTA_UNITS } from './headers.js'
import type { ObservedResponse } from './observed-response.js'
import { type MaybePromise, RATE_LIMIT_OPTION_KEYS, type RateLimitOptions } from './rate-limit-options.js'
import { inlineRuleName } from './rule-names.js'
import { costSettler, settleOf } from './settled-cost.js'
import type { UnusableIdentifier } from './usable-identifiers.js'
import { ADDRESS_FALLBACK, RATE_LIMIT_WARNING_CODES, UNUSABLE_IDENTIFIER } from './warnings.js'

/**
 * An HTTP engine's options, checked once when it is built (every error names the option and the
 * value) and resolved into what a request's check reads: the functions it calls, the decision
 * options it passes, the limiter it asks.
 */
export interface EngineConfig<Req> {
  readonly options: RateLimitOptions<Req>
  readonly limiter: Limiter
  /** The limiter was made here from `rules`/`windows`: the engine closes it. */
  readonly owned: boolean
  readonly rule: string | ((request: Req) => MaybePromise<string>)
  readonly identify: RateLimitOptions<Req>['identify']
  readonly skip: RateLimitOptions<Req>['skip']
  readonly onLimited: RateLimitOptions<Req>['onLimited']
  readonly problem: RateLimitOptions<Req>['problem']
  readonly refusal: RateLimitOptions<Req>['refusal']
  readonly cost: number | ((request: Req) => MaybePromise<number>)
  readonly ipv6Subnet: number
  /** Undefined for `headers: false`: only `Retry-After` is sent. */
  readonly headerOptions: HeaderOptions | undefined
  /** `dryRun`, `onStoreError`, `storeTimeoutMs` as given: each only when set, so that a rule's or the limiter's own applies otherwise. */
  readonly decisionDefaults: DecisionOptions
  /**
   * One frozen object for every request when the cost is fixed: the limiter checks it once. None
   * at all when it would hold only the limiter's own default, a cost of 1: the limiter then looks
   * nothing up for it.
   */
  readonly fixedCostOptions: DecisionOptions | undefined
  /** Gives a `countOnly` charge back once the response shows it should not count. */
  readonly settleCharge: ((response: ObservedResponse | undefined, charge: Charge<Req>) => void) | undefined
  /** Settles a request's reservation with the cost `settle` says, once the response is done; undefined without `settle`. */
  readonly settleCost:
    | ((response: ObservedResponse | undefined, request: Req, reservation: Reservation) => void)
    | undefined
  /** Each warning once per engine: they describe the set-up, which one request shows as well as a million. */
  readonly warnOnce: (key: string, message: string, code: string) => void
  /** The codes of `ignoreWarnings`: `warnOnce` drops them, and what only watches for one can skip watching. */
  readonly ignoredWarnings: ReadonlySet<string>
  readonly onAddressFallback: (how: AddressFallback) => void
  readonly onUnusable: (why: UnusableIdentifier) => void
}

/**
 * Checks and resolves an engine's options. `adapterOptions` names the options an adapter takes
 * itself and removes before these reach core (Koa's `throw`), so that an unknown option's error
 * lists them among the known ones.
 */
export function engineConfigOf<Req>(
  options: RateLimitOptions<Req>,
  adapterOptions: readonly string[],
): EngineConfig<Req> {
  const raw: unknown = options
  checkOptionsObject(raw, knownOptions(adapterOptions), 'rate limit options', {
    foreign: MIDDLEWARE_FOREIGN_OPTIONS,
  })
  const ignoredWarnings = ignoredWarningsOf(options.ignoreWarnings, RATE_LIMIT_WARNING_CODES, 'option')
  const onWarning = withoutIgnored(optionalFunction(options, 'onWarning') ?? processWarning, ignoredWarnings)
  const warnOnce = onceEach(onWarning)
  const identify = optionalFunction(options, 'identify')
  const skip = optionalFunction(options, 'skip')
  const onLimited = optionalFunction(options, 'onLimited')
  const problem = optionalFunction(options, 'problem')
  const refusal = optionalFunction(options, 'refusal')
  const countOnly = countOnlyOf(options.countOnly)
  const settle = settleOf(options)
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
  const fixedCostOptions =
    typeof cost !== 'number' || (cost === 1 && Object.keys(decisionDefaults).length === 0)
      ? undefined
      : Object.freeze({ ...decisionDefaults, cost })
  // Last, once every other option is known good: it may start a store's timers.
  const { limiter, rule, owned } = limiterOf(options, onWarning)
  if (settle !== undefined && limiter.store.chargesOverLimits !== true) {
    if (owned) void limiter.close()
    throw new TollgateConfigError(
      "option settle needs a store that charges over a limit (MemoryStore, RedisStore); the limiter's does not",
    )
  }
  return {
    options,
    limiter,
    owned,
    rule,
    identify,
    skip,
    onLimited,
    problem,
    refusal,
    cost,
    ipv6Subnet,
    headerOptions,
    decisionDefaults,
    fixedCostOptions,
    settleCharge: countOnly && chargeSettler(countOnly, limiter, storeTimeout, warnOnce),
    settleCost: settle && costSettler(settle, warnOnce),
    warnOnce,
    ignoredWarnings,
    onAddressFallback: (how) => warnOnce(how, ADDRESS_FALLBACK[how], 'TG_UNPARSEABLE_CLIENT_ADDRESS'),
    onUnusable: (why) => warnOnce(why, UNUSABLE_IDENTIFIER[why], 'TG_UNUSABLE_IDENTIFIER'),
  }
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

export function knownOptions(adapterOptions: readonly string[]): OptionKeys<RateLimitOptions<unknown>> {
  return adapterOptions.length === 0 ? RATE_LIMIT_OPTION_KEYS : new Set([...RATE_LIMIT_OPTION_KEYS, ...adapterOptions])
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
