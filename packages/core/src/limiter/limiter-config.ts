import type { LiveRules } from '../live-rules/live-rules.js'
import { LiveRuleSet } from '../live-rules/rule-set.js'
import { type LiveRulesSource, liveSourceOf } from '../live-rules/source.js'
import {
  type LiveResolution,
  type Rule,
  type RulesOptions,
  resolveRules,
  type WarningHandler,
  type Window,
} from '../rules/rules.js'
import { type StoreErrorPolicy, storeErrorPolicyOf } from '../rules/store-error-policy.js'
import { type BreakerSettings, breakerSettingsOf, type CircuitBreakerOptions } from '../store-calls/circuit-breaker.js'
import type { CallSettings } from '../store-calls/decision-options.js'
import type { PlanDefaults } from '../store-calls/decision-plan.js'
import { type BacklogOptions, type BacklogSettings, backlogSettingsOf } from '../store-calls/store-backlog.js'
import { storeTimeoutOf } from '../store-calls/store-wait.js'
import type { Store } from '../stores/store.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { LIMITER_FOREIGN_OPTIONS } from '../support/foreign-options.js'
import { ignoredWarningsOf, withoutIgnored } from '../support/ignored-warnings.js'
import { checkOptionsObject, optionKeys } from '../support/option-objects.js'
import { processWarning } from '../support/process-warning.js'
import { LIMITER_WARNING_CODES, type LimiterWarningCode } from './limiter-warnings.js'
import { warnOfClashes } from './rule-name-clash.js'

export interface LimiterOptions<Rules extends RulesOptions | LiveRules = RulesOptions> {
  /**
   * Where counts live. The limiter owns it: `limiter.close()` closes it.
   * @default new MemoryStore()
   */
  store?: Store
  /**
   * Rules by name, or the result of `loadRules(…)`. Given as a literal, its names are the only
   * ones `consume`, `peek`, `refund` and `reset` accept, to the compiler too. Or a `LiveRules`,
   * whose rules can be changed for the whole fleet while it runs (docs/live-rules.md): the
   * limiter then follows it until `limiter.close()`, and emits `rules` and `rules-rejected`.
   * @example { 'auth.createToken': { windows: [{ limit: 20, period: '60s' }, { limit: 5, period: '3s' }] } }
   * @example new LiveRules({ client: redis, defaults: { api: { windows: [{ limit: 100, period: '1m' }] } } })
   */
  rules: Rules
  /**
   * Receives warnings, each with a code: a window that can never bind (`TG_WINDOW_NEVER_BINDS`),
   * a period under a second given as a number of milliseconds (`TG_PERIOD_IN_MS`), decisions
   * failing open while the store fails and nothing listens to `store-error`
   * (`TG_STORE_FAILING_OPEN`), and the store answering again after that (`TG_STORE_RECOVERED`),
   * decisions refused for a full backlog (`TG_BACKLOG_FULL`), and a rule that another limiter on
   * the same store object keeps under the same name, algorithm and periods with other limits,
   * sharing its keys (`TG_RULE_NAME_CLASH`).
   * @default process.emitWarning
   */
  onWarning?: WarningHandler
  /**
   * Warnings to leave out, by code (docs/errors.md); the others still reach `onWarning`. A code a
   * limiter never emits is a `TG_CONFIG` error.
   * @default []
   * @example createLimiter({ rules, store, ignoreWarnings: ['TG_RULE_NAME_CLASH'] })
   */
  ignoreWarnings?: readonly LimiterWarningCode[]
  /**
   * What `consume` and `peek` answer when the store fails or does not answer within
   * `storeTimeoutMs`: `'allow'` (fail open, reason `store-error-allowed`), `'deny'` (fail
   * closed, reason `store-error-denied`) or `'local'` (count in this process alone against the
   * same rules until the store is back, reason `local-fallback`; the table a HybridStore's
   * outage policy counts on, bounded to 1,000,000 keys). Never an exception to the caller. Overridable per rule
   * and per call. Under `'allow'`, unless something listens to the limiter's `store-error`
   * events, the first decision to fail open warns (`TG_STORE_FAILING_OPEN`), and so does the
   * store's next answer (`TG_STORE_RECOVERED`).
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicy
  /**
   * The most milliseconds a decision waits on a silent store, whatever the client's own
   * timeouts and retries: its connection to Redis had commands outstanding and no reply for that
   * long. Time a decision spends queued in a busy process, or behind other commands Redis keeps
   * answering, does not count (see `backlog`). Overridable per call.
   * @default 100
   */
  storeTimeoutMs?: number
  /**
   * After `failureThreshold` consecutive store failures, decisions stop waiting for the store
   * and take the failure policy at once; every `probeAfterMs` one decision probes the store, and
   * its answer closes the breaker again. State changes are emitted as `breaker` events. A
   * failure of one decision alone (`error.storeDown === false`, such as a key of the wrong type)
   * takes its policy but neither counts toward the breaker nor resets its count.
   * @default { failureThreshold: 3, probeAfterMs: 500 }
   */
  breaker?: CircuitBreakerOptions
  /**
   * The most decisions waiting for the store at once, and what a decision does past it: refused
   * with reason `overloaded` (the adapters answer 503), or queued in the process until one ends.
   * Never let through unlimited. A flood is decided by the store as long as it answers: time a
   * decision spends queued in the process or behind other commands that Redis is answering does
   * not count toward `storeTimeoutMs`.
   * @default { max: 20000, whenFull: 'refuse' }
   * @example createLimiter({ rules, backlog: { max: 50_000, whenFull: 'wait' } })
   */
  backlog?: BacklogOptions
  /**
   * Shadow mode for every rule (Envoy's `shadow_mode`): decisions never refuse; one that would
   * is allowed with reason `dry-run` and `retryAfterMs` 0, its windows still marking which one
   * refused, and charges nothing. A rule's `dryRun` overrides it, and a call's `dryRun`
   * overrides both.
   * @default false
   * @example createLimiter({ rules, dryRun: true })
   */
  dryRun?: boolean
  /**
   * Where shedding's random numbers come from (windows with `lowBurst`): a function returning a
   * number from 0 up to but not including 1, as `Math.random` does. It is called exactly once per
   * `consume` or `peek` of a rule whose windows or parents' windows shed, and never otherwise; a
   * value outside [0, 1) fails that decision with a `TG_CONFIG` error. Tests pass a seeded
   * generator to replay a run.
   * @default Math.random
   * @example createLimiter({ rules, random: seededGenerator(42) })
   */
  random?: () => number
}

/** A rule set as the limiter resolved it, and the settings its plans take: replaced as one when live rules change. */
export interface ActiveRules extends PlanDefaults {
  readonly rules: ReadonlyMap<string, Rule>
}

/** The limiter's options, checked and resolved once, at construction. */
export interface LimiterConfig {
  /** Undefined: an in-process store, made once the rest is known good. */
  readonly store: Store | undefined
  readonly active: ActiveRules
  /** The live rules it follows, if it was given a LiveRules. */
  readonly live: LiveRulesSource | undefined
  /** Resolves a rule set as this limiter does (its dryRun, its store's algorithms); throws TG_CONFIG. */
  resolve(options: unknown, warn: WarningHandler, live?: LiveResolution): ActiveRules
  readonly onWarning: WarningHandler
  /** Warnings the rules gave so far, so that a rule set resolved again does not repeat them. */
  readonly warned: Set<string>
  readonly breaker: BreakerSettings
  readonly backlog: BacklogSettings
  readonly storeTimeoutMs: number
  /** What a call without options gets, one object for every such call. */
  readonly callDefaults: CallSettings
}

const OPTION_KEYS = optionKeys<LimiterOptions>({
  store: true,
  rules: true,
  onWarning: true,
  ignoreWarnings: true,
  onStoreError: true,
  storeTimeoutMs: true,
  breaker: true,
  backlog: true,
  dryRun: true,
  random: true,
})

const DEFAULT_STORE_TIMEOUT_MS = 100

export function limiterConfigOf(raw: unknown): LimiterConfig {
  const options = checkOptionsObject(raw, OPTION_KEYS, 'createLimiter options', {
    shape: '{ rules }',
    foreign: LIMITER_FOREIGN_OPTIONS,
  })
  const { store, onWarning = processWarning, dryRun = false, random = Math.random } = options
  if (typeof onWarning !== 'function') {
    throw new TollgateConfigError(`createLimiter option onWarning must be a function, got ${describeValue(onWarning)}`)
  }
  const ignored = ignoredWarningsOf(options.ignoreWarnings, LIMITER_WARNING_CODES, 'createLimiter option')
  const notify = withoutIgnored(onWarning as WarningHandler, ignored)
  if (store !== undefined && !isStore(store)) {
    throw new TollgateConfigError(
      `createLimiter option store must be a Store such as new RedisStore({ client }), got ${describeValue(store)}`,
    )
  }
  if (typeof random !== 'function') {
    throw new TollgateConfigError(
      `createLimiter option random must be a function returning a number in [0, 1), such as Math.random, got ${describeValue(random)}`,
    )
  }
  if (typeof dryRun !== 'boolean') {
    throw new TollgateConfigError(`createLimiter option dryRun must be a boolean, got ${describeValue(dryRun)}`)
  }
  const onStoreError = storeErrorPolicyOf(
    options.onStoreError === undefined ? 'allow' : options.onStoreError,
    TollgateConfigError,
    'createLimiter option onStoreError',
  )
  const storeTimeoutMs = storeTimeoutOf(
    options.storeTimeoutMs === undefined ? DEFAULT_STORE_TIMEOUT_MS : options.storeTimeoutMs,
    TollgateConfigError,
    'createLimiter option storeTimeoutMs',
  )
  const breaker = breakerSettingsOf(options.breaker)
  const backlog = backlogSettingsOf(options.backlog)
  const warned = new Set<string>()
  const warn: WarningHandler = (message, code) => {
    warned.add(message)
    notify(message, code)
  }
  const resolve = (rules: unknown, warnWith: WarningHandler, live?: LiveResolution): ActiveRules => {
    // A live rule set resolves again, and searches again, only the rules its change touched.
    const resolved =
      rules instanceof LiveRuleSet ? rules.resolve(warnWith, dryRun) : resolveRules(rules, warnWith, dryRun, live)
    if (store !== undefined) checkAlgorithmsSupported(store, resolved)
    if (store !== undefined) checkBlocksHeld(store, resolved)
    if (store !== undefined) warnOfClashes(store, resolved, liveSourceOf(options.rules), warnWith)
    const shedding =
      rules instanceof LiveRuleSet ? rules.rulesWhere(sheds) : new Set([...resolved.values()].filter(sheds))
    return {
      rules: resolved,
      random: random as () => number,
      shedding: shedding.size > 0 ? shedding : undefined,
      onStoreError,
      dryRun,
    }
  }
  const live = liveSourceOf(options.rules)
  const active = live ? resolve(live.options, warn, live.resolution) : resolve(options.rules, warn)
  return {
    store,
    active,
    live,
    resolve,
    onWarning: notify,
    warned,
    breaker,
    backlog,
    storeTimeoutMs,
    callDefaults: { cost: 1, dryRun: undefined, onStoreError: undefined, storeTimeoutMs },
  }
}

function sheds(rule: Rule): boolean {
  return rule.chain.some(hasLowBurst)
}

function hasLowBurst(rule: Rule): boolean {
  const shedding = (windows: readonly Window[]) => windows.some((window) => window.lowBurst !== undefined)
  return shedding(rule.windows) || (rule.overrides?.list.some((override) => shedding(override.windows)) ?? false)
}

function isStore(value: unknown): value is Store {
  const store = value as Partial<Store> | null
  return typeof store?.evaluate === 'function' && typeof store.reset === 'function'
}

/** A rule's `block` needs a store that keeps blocks (MemoryStore, RedisStore): on another, it is refused here, by name. */
function checkBlocksHeld(store: Store, rules: ReadonlyMap<string, Rule>): void {
  if (store.holdsBlocks === true) return
  for (const rule of rules.values()) {
    if (rule.block !== undefined) {
      throw new TollgateConfigError(
        `rule '${rule.name}': block cannot run on ${storeName(store)}, which keeps no blocks; use a RedisStore or a MemoryStore for this rule's limiter`,
      )
    }
  }
}

/** A store that decides only some algorithms (a HybridStore: no sliding log) refuses the others' rules here, by name. */
function checkAlgorithmsSupported(store: Store, rules: ReadonlyMap<string, Rule>): void {
  const supported = store.supportedAlgorithms
  if (supported === undefined) return
  for (const rule of rules.values()) {
    if (!supported.includes(rule.algorithm)) {
      throw new TollgateConfigError(
        `rule '${rule.name}': algorithm '${rule.algorithm}' cannot run on ${storeName(store)}; use ${supported.map((a) => `'${a}'`).join(', ')}`,
      )
    }
  }
}

/** A store as errors name it: its class, or 'this store'. */
export function storeName(store: Store): string {
  const name = (store as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === 'string' && name !== '' && name !== 'Object' ? name : 'this store'
}
