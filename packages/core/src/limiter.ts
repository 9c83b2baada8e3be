import { EventEmitter } from 'node:events'
import { type BreakerChange, CircuitBreaker, type CircuitBreakerOptions } from './circuit-breaker.js'
import type { Decision, WindowState } from './decision.js'
import { describeValue, TollgateArgumentError, TollgateConfigError, TollgateError } from './errors.js'
import { validateIdentifier } from './keys.js'
import {
  isPlainObject,
  type Rule,
  type RulesOptions,
  rejectUnknownKeys,
  resolveRules,
  type WarningHandler,
} from './rules.js'
import {
  asStoreError,
  callStore,
  isStoreDown,
  type StoreErrorPolicy,
  StoreWait,
  storeErrorPolicyOf,
  storeFailureDecision,
  storeTimeoutOf,
  type WaitHandler,
} from './store-failure.js'
import { MemoryStore } from './stores/memory-store.js'
import type { Store, StoreOperation, StoreRequest, StoreResult, StoreTarget } from './stores/store.js'

export interface LimiterOptions {
  /**
   * Where counts live. The limiter owns it: `limiter.close()` closes it.
   * @default new MemoryStore()
   */
  store?: Store
  /**
   * Rules by name, or the result of `loadRules(…)`.
   * @example { 'auth.createToken': { windows: [{ limit: 20, period: '60s' }, { limit: 5, period: '3s' }] } }
   */
  rules: RulesOptions
  /**
   * Receives configuration warnings, such as a window that can never bind.
   * @default process.emitWarning
   */
  onWarning?: WarningHandler
  /**
   * What `consume` and `peek` answer when the store fails or does not answer within
   * `storeTimeoutMs`: `'allow'` (fail open, reason `store-error-allowed`), `'deny'` (fail
   * closed, reason `store-error-denied`) or `'local'` (decide on an in-process store with the
   * same rules, reason `local-fallback`). Never an exception to the caller. Overridable per rule
   * and per call.
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicy
  /**
   * The most milliseconds one decision waits for the store, whatever the client's own
   * timeouts and retries. Overridable per call.
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
}

/**
 * Events a limiter emits: `breaker` on every breaker state change, `store-error` on every store
 * failure (its `storeDown` false when only that decision failed, on a broken key say).
 */
export interface LimiterEvents {
  breaker: [change: BreakerChange]
  'store-error': [error: TollgateError]
}

export interface DecisionOptions {
  /**
   * Units this request counts for: 1 per request, or bytes, tokens… An integer ≥ 0; 0 checks
   * without charging.
   * @default 1
   */
  cost?: number
  /**
   * Never refuse: a decision that would be refused is allowed with reason `dry-run` and
   * `retryAfterMs` 0, its windows still marking which one refused. Nothing is charged for it.
   * @default false
   */
  dryRun?: boolean
  /** This call's store failure policy. @default the rule's, else the limiter's `onStoreError` */
  onStoreError?: StoreErrorPolicy
  /** This call's bound on the store's answer, in ms. @default the limiter's `storeTimeoutMs` */
  storeTimeoutMs?: number
}

export interface ResetOptions {
  /**
   * Also forget the state of the rule's parents, and theirs, for these identifiers. A parent
   * counts what every one of its children spent, so forgetting it hands back units spent
   * through the rule's siblings too.
   * @default false
   * @example limiter.reset('api.login', 'user:1', { parents: true })
   */
  parents?: boolean
}

/** Identifiers or windows beyond these make one decision unreasonably large; they are refused. */
export const MAX_IDENTIFIERS = 8

export interface Limiter extends EventEmitter<LimiterEvents> {
  /** Checks every window of the rule and its parents for every identifier; charges all or none. */
  consume(rule: string, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  /** The decision `consume` would make now, charging nothing. */
  peek(rule: string, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  /** Gives `cost` units back to every window `consume` would charge, most recent first, each window what it still counts of them; all or nothing. Store failures reject (code `TG_STORE`). */
  refund(rule: string, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  /**
   * Forgets the state of the rule's own windows for these identifiers; with `{ parents: true }`,
   * its parents' too. Store failures reject (code `TG_STORE`).
   */
  reset(rule: string, identifiers: string | readonly string[], options?: ResetOptions): Promise<void>
  /** Refuses new calls, waits for those in flight, then closes the store. */
  close(): Promise<void>
  /** The resolved rules, by name. */
  readonly rules: ReadonlyMap<string, Rule>
  /** The store deciding, so that other limiters can share it. */
  readonly store: Store
  /** The circuit breaker's state: `closed` while the store answers. */
  readonly breakerState: BreakerChange['state']
}

const OPTION_KEYS = new Set(['store', 'rules', 'onWarning', 'onStoreError', 'storeTimeoutMs', 'breaker'])
const DECISION_OPTION_KEYS = new Set(['cost', 'dryRun', 'onStoreError', 'storeTimeoutMs'])
const RESET_OPTION_KEYS = new Set(['parents'])
const DEFAULT_STORE_TIMEOUT_MS = 100

interface ResolvedDecisionOptions {
  cost: number
  dryRun: boolean
  /** Undefined: the rule's policy, else the limiter's. */
  onStoreError: StoreErrorPolicy | undefined
  storeTimeoutMs: number
}

const emitWarning: WarningHandler = (message, code) => process.emitWarning(message, { code })

export function createLimiter(options: LimiterOptions): Limiter {
  const raw: unknown = options
  if (!isPlainObject(raw)) {
    throw new TollgateConfigError(`createLimiter options must be an object { rules }, got ${describeValue(raw)}`)
  }
  rejectUnknownKeys(raw, OPTION_KEYS, 'createLimiter')
  const { onWarning = emitWarning } = options
  if (typeof onWarning !== 'function') {
    throw new TollgateConfigError(`createLimiter option onWarning must be a function, got ${describeValue(onWarning)}`)
  }
  if (
    options.store !== undefined &&
    (typeof options.store?.evaluate !== 'function' || typeof options.store.reset !== 'function')
  ) {
    throw new TollgateConfigError(
      `createLimiter option store must be a Store such as new RedisStore({ client }), got ${describeValue(options.store)}`,
    )
  }
  const onStoreError = storeErrorPolicyOf(
    options.onStoreError === undefined ? 'allow' : options.onStoreError,
    TollgateConfigError,
    'createLimiter option onStoreError',
  )
  const defaults: ResolvedDecisionOptions = {
    cost: 1,
    dryRun: false,
    onStoreError: undefined,
    storeTimeoutMs: storeTimeoutOf(
      options.storeTimeoutMs === undefined ? DEFAULT_STORE_TIMEOUT_MS : options.storeTimeoutMs,
      TollgateConfigError,
      'createLimiter option storeTimeoutMs',
    ),
  }
  const events = new EventEmitter<LimiterEvents>()
  const breaker = new CircuitBreaker(options.breaker, (change) => {
    // Back on the shared store: counts made alone during the outage no longer apply.
    if (change.state === 'closed') dropLocalStore()
    events.emit('breaker', change)
  })
  const rules = resolveRules(options.rules, onWarning)
  // Made only once everything else is valid, so a config error leaves no sweep timer behind.
  const store: Store = options.store ?? new MemoryStore()
  let inFlight = 0
  let drained: (() => void) | undefined
  let closing: Promise<void> | undefined
  let localStore: MemoryStore | undefined
  const evaluateSync = store.evaluateSync?.bind(store)
  const evaluateInto = store.evaluateInto?.bind(store)
  const recentError = store.recentError?.bind(store)

  function dropLocalStore() {
    void localStore?.close()
    localStore = undefined
  }

  function settled() {
    if (--inFlight === 0) drained?.()
  }

  function track<T>(work: Promise<T>): Promise<T> {
    inFlight++
    work.then(settled, settled)
    return work
  }

  function closedError() {
    return new TollgateError('TG_CLOSED', 'the limiter is closed')
  }

  /** The store's answer, unless it fails, times out, or the breaker is open: then the failure. */
  function guarded<T>(call: () => Promise<T>, timeoutMs: number, onLateAnswer?: (answer: T) => void): Promise<T> {
    if (!breaker.tryAcquire()) return Promise.reject(breakerOpenError())
    return callStore(call, timeoutMs, onLateAnswer).then(
      (answer) => {
        breaker.success()
        return answer
      },
      (cause: unknown) => {
        throw storeFailed(cause)
      },
    )
  }

  function breakerOpenError(): TollgateError {
    const open = new TollgateError('TG_STORE', 'the store is failing: its circuit breaker is open')
    return asStoreError(open, recentError?.())
  }

  function decide(operation: StoreOperation, ruleName: string, identifiers: unknown, options: unknown) {
    if (closing) return Promise.reject(closedError())
    let plan: Plan
    try {
      plan = planOf(
        operation,
        ruleOf(rules, ruleName),
        identifiersOf(identifiers),
        decisionOptionsOf(options, defaults),
        onStoreError,
      )
    } catch (error) {
      return Promise.reject(error)
    }
    // An in-process store answers at once: no timer, no breaker, no promise until the end.
    if (evaluateSync) {
      try {
        return Promise.resolve(finish(plan, evaluateSync(plan.request)))
      } catch (cause) {
        const error = asStoreError(cause)
        if (operation === 'refund') return Promise.reject(error)
        events.emit('store-error', error)
        return Promise.resolve(failureDecision(plan, error))
      }
    }
    return decideOnStore(plan)
  }

  /** A store failure, reported, and counted by the breaker unless it was one decision's own. */
  function storeFailed(cause: unknown): TollgateError {
    const error = asStoreError(cause, recentError?.())
    if (isStoreDown(error)) breaker.failure(error)
    else breaker.inconclusive()
    events.emit('store-error', error)
    return error
  }

  /**
   * One decision waiting for the store: its answer, failure or timeout settles the decision's
   * promise, once. An object rather than closures: every decision on Redis waits in one.
   */
  class PendingDecision implements WaitHandler<StoreResult> {
    constructor(
      private readonly plan: Plan,
      private readonly resolve: (decision: Decision) => void,
      private readonly reject: (error: unknown) => void,
    ) {}

    answered(result: StoreResult): void {
      breaker.success()
      let decision: Decision
      try {
        decision = finish(this.plan, result)
      } catch (error) {
        this.byPolicy(error)
        return
      }
      settled()
      this.resolve(decision)
    }

    failed(cause: unknown): void {
      let error: TollgateError
      try {
        error = storeFailed(cause)
      } catch (listenerError) {
        // A 'store-error' listener threw: that error is the caller's to see.
        settled()
        this.reject(listenerError)
        return
      }
      this.byPolicy(error)
    }

    // An answer after the timeout was still charged by the store; unless the policy let the
    // request through, take that charge back so a refused request consumes nothing.
    late(result: StoreResult): void {
      if (this.plan.policy === 'allow' || !result.allowed || !result.revert) return
      result.revert().catch((error: unknown) => events.emit('store-error', asStoreError(error)))
    }

    private byPolicy(error: unknown): void {
      settled()
      if (this.plan.request.operation === 'refund') {
        this.reject(error)
        return
      }
      try {
        this.resolve(failureDecision(this.plan, error))
      } catch (failure) {
        this.reject(failure)
      }
    }
  }

  /**
   * The store's answer made a decision, or its failure, timeout or open breaker made one by the
   * policy.
   */
  function decideOnStore(plan: Plan): Promise<Decision> {
    const { request } = plan
    if (!breaker.tryAcquire()) {
      const error = breakerOpenError()
      return request.operation === 'refund' ? Promise.reject(error) : settleFailure(plan, error)
    }
    inFlight++
    return new Promise<Decision>((resolve, reject) => {
      const wait = new StoreWait<StoreResult>(plan.storeTimeoutMs, new PendingDecision(plan, resolve, reject))
      try {
        if (evaluateInto) evaluateInto(request, wait)
        else {
          store.evaluate(request).then(
            (result) => wait.answer(result),
            (error: unknown) => wait.fail(error),
          )
        }
      } catch (cause) {
        wait.fail(cause)
      }
    })
  }

  function settleFailure(plan: Plan, error: unknown): Promise<Decision> {
    try {
      return Promise.resolve(failureDecision(plan, error))
    } catch (failure) {
      return Promise.reject(failure)
    }
  }

  function failureDecision(plan: Plan, error: unknown): Decision {
    const { policy, rule, cost, request } = plan
    if (policy !== 'local') return storeFailureDecision(rule.name, cost, policy, error)
    localStore ??= new MemoryStore()
    const local = toDecision(rule.name, cost, request.targets, localStore.evaluateSync(request))
    return withDryRun(plan, { ...local, reason: 'local-fallback', error: asStoreError(error) })
  }

  // A property, not a copied value: Object.assign would read the state once.
  Object.defineProperty(events, 'breakerState', { get: () => breaker.current, enumerable: true })
  return Object.assign(events as EventEmitter<LimiterEvents> & { readonly breakerState: BreakerChange['state'] }, {
    rules,
    store,
    consume: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
      decide('consume', rule, identifiers, options),
    peek: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
      decide('peek', rule, identifiers, options),
    refund: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
      decide('refund', rule, identifiers, options),
    reset(rule: string, identifiers: string | readonly string[], options?: ResetOptions) {
      if (closing) return Promise.reject(closedError())
      let targets: StoreTarget[]
      try {
        const resolved = ruleOf(rules, rule)
        const ids = identifiersOf(identifiers)
        targets = targetsOf(resetsParents(options) ? resolved.chain : [resolved], ids)
      } catch (error) {
        return Promise.reject(error)
      }
      return track(guarded(() => store.reset(targets), defaults.storeTimeoutMs))
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        drained = resolve
        if (inFlight === 0) resolve()
      }).then(async () => {
        dropLocalStore()
        await store.close()
      })
      return closing
    },
  })
}

function ruleOf(rules: ReadonlyMap<string, Rule>, name: string): Rule {
  const rule = rules.get(name)
  if (!rule) {
    throw new TollgateError(
      'TG_UNKNOWN_RULE',
      `unknown rule ${describeValue(name)}; the limiter holds ${[...rules.keys()].map((n) => `'${n}'`).join(', ')}`,
    )
  }
  return rule
}

function identifiersOf(identifiers: unknown): readonly string[] {
  const list = typeof identifiers === 'string' ? [identifiers] : identifiers
  if (!Array.isArray(list) || list.length === 0) {
    throw new TollgateArgumentError(
      `identifiers must be a non-empty string or array of strings, got ${describeValue(identifiers)}`,
    )
  }
  if (list.length > MAX_IDENTIFIERS) {
    throw new TollgateArgumentError(`a decision takes at most ${MAX_IDENTIFIERS} identifiers, got ${list.length}`)
  }
  for (let i = 0; i < list.length; i++) {
    validateIdentifier(list[i])
    if (list.indexOf(list[i]) !== i) {
      throw new TollgateArgumentError(`identifier ${describeValue(list[i])} is given twice; it would be charged twice`)
    }
  }
  return list as readonly string[]
}

/**
 * Options objects that cannot change, already checked, per limiter defaults: an HTTP engine passes
 * the same frozen object with every request, and checking it again would cost a tenth of an
 * in-process decision.
 */
const checkedOptions = new WeakMap<object, { defaults: ResolvedDecisionOptions; resolved: ResolvedDecisionOptions }>()

function decisionOptionsOf(options: unknown, defaults: ResolvedDecisionOptions): ResolvedDecisionOptions {
  if (options === undefined) return defaults
  if (typeof options === 'object' && options !== null && Object.isFrozen(options)) {
    const checked = checkedOptions.get(options)
    if (checked?.defaults === defaults) return checked.resolved
    const resolved = checkOptions(options, defaults)
    checkedOptions.set(options, { defaults, resolved })
    return resolved
  }
  return checkOptions(options, defaults)
}

function checkOptions(options: unknown, defaults: ResolvedDecisionOptions): ResolvedDecisionOptions {
  if (!isPlainObject(options)) {
    throw new TollgateArgumentError(`decision options must be an object { cost }, got ${describeValue(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!DECISION_OPTION_KEYS.has(key)) {
      throw new TollgateArgumentError(
        `unknown decision option '${key}'; known: ${[...DECISION_OPTION_KEYS].map((k) => `'${k}'`).join(', ')}`,
      )
    }
  }
  const { cost = 1, dryRun = defaults.dryRun, onStoreError, storeTimeoutMs } = options
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new TollgateArgumentError(`cost must be a non-negative integer, got ${describeValue(cost)}`)
  }
  if (typeof dryRun !== 'boolean')
    throw new TollgateArgumentError(`dryRun must be a boolean, got ${describeValue(dryRun)}`)
  return {
    cost,
    dryRun,
    onStoreError:
      onStoreError === undefined
        ? undefined
        : storeErrorPolicyOf(onStoreError, TollgateArgumentError, 'decision option onStoreError'),
    storeTimeoutMs:
      storeTimeoutMs === undefined
        ? defaults.storeTimeoutMs
        : storeTimeoutOf(storeTimeoutMs, TollgateArgumentError, 'decision option storeTimeoutMs'),
  }
}

function resetsParents(options: unknown): boolean {
  if (options === undefined) return false
  if (!isPlainObject(options)) {
    throw new TollgateArgumentError(`reset options must be an object { parents }, got ${describeValue(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!RESET_OPTION_KEYS.has(key)) {
      throw new TollgateArgumentError(
        `unknown reset option '${key}'; known: ${[...RESET_OPTION_KEYS].map((k) => `'${k}'`).join(', ')}`,
      )
    }
  }
  const { parents = false } = options
  if (typeof parents !== 'boolean') {
    throw new TollgateArgumentError(`reset option parents must be a boolean, got ${describeValue(parents)}`)
  }
  return parents
}

/** One target per rule and identifier, in rule order, then identifier order. */
function targetsOf(rules: readonly Rule[], identifiers: readonly string[]): StoreTarget[] {
  const targets: StoreTarget[] = []
  for (const link of rules) {
    for (const identifier of identifiers) {
      targets.push({ rule: link.name, algorithm: link.algorithm, windows: link.windows, identifier })
    }
  }
  return targets
}

/** One call's decision, resolved before any I/O. */
interface Plan {
  rule: Rule
  request: StoreRequest
  cost: number
  dryRun: boolean
  policy: StoreErrorPolicy
  storeTimeoutMs: number
}

function planOf(
  operation: StoreOperation,
  rule: Rule,
  identifiers: readonly string[],
  options: ResolvedDecisionOptions,
  limiterPolicy: StoreErrorPolicy,
): Plan {
  const { cost, dryRun, storeTimeoutMs } = options
  return {
    rule,
    request: { operation, targets: targetsOf(rule.chain, identifiers), cost },
    cost,
    dryRun,
    policy: options.onStoreError ?? rule.onStoreError ?? limiterPolicy,
    storeTimeoutMs,
  }
}

function finish(plan: Plan, result: StoreResult): Decision {
  return withDryRun(plan, toDecision(plan.rule.name, plan.cost, plan.request.targets, result))
}

function withDryRun(plan: Plan, decision: Decision): Decision {
  if (plan.dryRun && !decision.allowed && plan.request.operation !== 'refund') {
    // Allowed, so nothing to wait for: a client told to retry later would hold back for nothing.
    return { ...decision, allowed: true, reason: 'dry-run', retryAfterMs: 0 }
  }
  return decision
}

function toDecision(
  rule: string,
  cost: number,
  targets: readonly StoreTarget[],
  result: Awaited<ReturnType<Store['evaluate']>>,
): Decision {
  const { allowed, nowMs } = result
  const windows: WindowState[] = []
  let retryAt = nowMs
  let i = 0
  for (const target of targets) {
    for (const window of target.windows) {
      const answer = result.windows[i++]
      if (!answer) throw new TollgateError('TG_STORE', 'the store answered fewer windows than the decision holds')
      const failed = !allowed && answer.fitsAtMs > nowMs
      if (failed) retryAt = Math.max(retryAt, answer.fitsAtMs)
      windows.push({
        rule: target.rule,
        identifier: target.identifier,
        limit: window.limit,
        periodMs: window.periodMs,
        remaining: answer.remaining,
        resetAtMs: answer.resetAtMs,
        failed,
      })
    }
  }
  return {
    allowed,
    reason: allowed ? 'ok' : 'limited',
    rule,
    cost,
    retryAfterMs: retryAt - nowMs,
    nowMs,
    windows,
  }
}
