import type { EventEmitter } from 'node:events'
import type { RuleRejection, RulesChange } from '../live-rules/source.js'
import type { Decision } from '../rules/decision.js'
import { KeyBuilder } from '../rules/keys.js'
import type { WarningHandler } from '../rules/rules.js'
import { storeFailureDecision } from '../rules/store-error-policy.js'
import { type AnswerInto, answersIntoOf } from '../stores/shared/answers-into.js'
import { fillTargets, type TargetSlot } from '../stores/shared/decision-targets.js'
import { LocalCounts } from '../stores/shared/local-counts.js'
import { DECIDES_IN_PROCESS, type DecidesInProcess } from '../stores/shared/local-decision.js'
import type { Store, StoreRequest, StoreResult, StoreTarget } from '../stores/store.js'
import { TollgateError } from '../support/errors.js'
import { Fifo } from '../support/fifo.js'
import { type BreakerChange, type BreakerSettings, CircuitBreaker } from './circuit-breaker.js'
import { type DecisionPlan, decisionOf, fallbackDecisionOf, requestOf } from './decision-plan.js'
import { FailOpenNotice } from './fail-open-notice.js'
import { NOT_OBSERVED, Observers, TIMED } from './observers.js'
import { type CallSettler, PendingDecision, PendingReset, type QueuedDecision } from './pending-calls.js'
import { type BacklogSettings, overloadedDecision } from './store-backlog.js'
import { asStoreError, isStoreDown, storeErrorKindOf } from './store-errors.js'
import { StoreWait } from './store-wait.js'

/**
 * Events a limiter emits: `breaker` on every breaker state change, `store-error` on every store
 * failure (its `storeDown` false when only that decision failed, on a broken key say). A limiter
 * on live rules also emits `rules` each time it applies a new epoch that changed rules (or whose
 * changes were all rejected), naming the rules that changed, and `rules-rejected` for each stored rule it would not apply (the rule's last good
 * version stays).
 */
export interface LimiterEvents {
  breaker: [change: BreakerChange]
  'store-error': [error: TollgateError]
  rules: [change: RulesChange]
  'rules-rejected': [rejection: RuleRejection]
}

/**
 * Every call a limiter makes to its store goes through here: decisions (consume, peek, refund)
 * and resets. It asks the store the fastest way the store offers (at once for an in-process
 * store, through a receiver, or by a promise), bounds the wait, keeps the circuit breaker,
 * reports failures as `store-error` events, takes back a charge that came too late, and turns a
 * failure into the decision of the plan's policy. It also counts the calls in flight, so that
 * closing waits for them, and shows every `consume` decision and store failure to the observers.
 */
export class StoreCaller implements CallSettler {
  readonly observers = new Observers()
  private readonly breaker: CircuitBreaker
  private readonly notice: FailOpenNotice
  /** The store's own one-pass decision, when it is a store of this copy of core that decides in the process. */
  private readonly inProcess: DecidesInProcess | undefined
  private readonly evaluateSync: ((request: StoreRequest) => StoreResult | undefined) | undefined
  /** How the store takes a receiver instead of making a promise, if it does (stores/shared/answers-into.ts). */
  private readonly answersInto: AnswerInto | undefined
  private readonly recentError: (() => Error | undefined) | undefined
  private inFlight = 0
  /** Decisions waiting for the store, bounded by `backlog.max`. */
  private waiting = 0
  /** Decisions queued for room in the backlog (`whenFull: 'wait'`), oldest first. */
  private readonly queued = new Fifo<QueuedDecision>()
  private overloadWarned = false
  private drained: (() => void) | undefined
  private closed: Promise<void> | undefined
  /** What the `'local'` policy counts in this process, from the first failure until the breaker closes. */
  private localCounts: LocalCounts | undefined

  constructor(
    private readonly store: Store,
    breaker: BreakerSettings,
    private readonly backlog: BacklogSettings,
    private readonly events: EventEmitter<LimiterEvents>,
    private readonly warn: WarningHandler,
  ) {
    this.breaker = new CircuitBreaker(breaker, (change) => {
      // Back on the shared store: counts made alone during the outage no longer apply.
      if (change.state === 'closed') this.dropLocalCounts()
      events.emit('breaker', change)
    })
    this.notice = new FailOpenNotice(warn, () => events.listenerCount('store-error') > 0)
    this.inProcess = DECIDES_IN_PROCESS in store ? (store as Store & DecidesInProcess) : undefined
    this.evaluateSync = store.evaluateSync?.bind(store)
    this.answersInto = answersIntoOf(store)
    this.recentError = store.recentError?.bind(store)
  }

  get breakerState(): BreakerChange['state'] {
    return this.breaker.current
  }

  /** Once `close` is called: no new call may begin. */
  get closing(): boolean {
    return this.closed !== undefined
  }

  /**
   * The store's answer as a decision, or its failure, timeout or open breaker as the decision of
   * the plan's policy; a refund rejects instead (code `TG_STORE`). A decision made in the process
   * comes back as it is, not in a promise, so that a caller who can go on at once (an HTTP
   * adapter) does, without a turn of the microtask queue; one that waited for a store comes in a
   * promise. Never throws.
   */
  decide(plan: DecisionPlan): Decision | Promise<Decision> {
    let observed = this.observers.state
    if (observed === TIMED) observed = this.observers.startTiming(plan.operation)
    // An in-process store answers at once: no timer, no breaker, no promise.
    if (this.inProcess !== undefined || this.evaluateSync !== undefined) {
      try {
        const decision = this.decideInProcess(plan)
        if (decision !== undefined) return this.delivered(plan, decision, observed)
      } catch (error) {
        return Promise.reject(error)
      }
    }
    try {
      requestOf(plan)
    } catch (error) {
      return Promise.reject(error)
    }
    if (this.waiting >= this.backlog.max && this.breaker.current === 'closed') {
      if (this.backlog.whenFull === 'refuse') {
        this.noticeOverload()
        try {
          return Promise.resolve(this.delivered(plan, overloadedDecision(plan.rule.name, plan.cost), observed))
        } catch (error) {
          return Promise.reject(error)
        }
      }
      this.inFlight++
      return new Promise<Decision>((resolve, reject) => {
        this.queued.push({ plan, resolve, reject, observed })
      })
    }
    this.inFlight++
    return new Promise<Decision>((resolve, reject) => this.ask(plan, resolve, reject, observed))
  }

  /** Asks the store for the decision, unless the breaker is open. The call is counted in flight. */
  private ask(
    plan: DecisionPlan,
    resolve: (decision: Decision) => void,
    reject: (error: unknown) => void,
    observed: number,
  ): void {
    if (!this.breaker.tryAcquire()) {
      this.callEnded()
      try {
        this.observers.storeFailed('breaker_open')
        resolve(this.delivered(plan, this.decisionWithoutStore(plan, this.breakerOpenError()), observed))
      } catch (error) {
        reject(error)
      }
      return
    }
    this.waiting++
    const wait = new StoreWait<StoreResult>(
      plan.storeTimeoutMs,
      new PendingDecision(this, plan, resolve, reject, observed),
    )
    const request = requestOf(plan)
    try {
      if (this.answersInto) this.answersInto(request, wait)
      else {
        this.store.evaluate(request).then(
          (result) => wait.answer(result),
          (error: unknown) => wait.fail(error),
        )
      }
    } catch (cause) {
      wait.fail(cause)
    }
  }

  /**
   * A decision that waited for the store ended: the oldest ones queued for room take its place,
   * as many as there is room for (one the open breaker answers at once takes none).
   */
  decisionEnded(): void {
    this.waiting--
    this.callEnded()
    while (this.waiting < this.backlog.max) {
      const next = this.queued.shift()
      if (next === undefined) return
      this.ask(next.plan, next.resolve, next.reject, next.observed)
    }
  }

  private noticeOverload(): void {
    if (this.overloadWarned) return
    this.overloadWarned = true
    this.warn(
      `${this.backlog.max} decisions were waiting for the store, the limiter's backlog.max: further decisions are refused with reason 'overloaded' (HTTP 503) until some end. Raise backlog.max if the process has the memory, or set backlog.whenFull to 'wait'`,
      'TG_BACKLOG_FULL',
    )
  }

  /** Forgets exactly these targets. Failures reject (code `TG_STORE`), after `timeoutMs` at the latest. */
  reset(targets: readonly StoreTarget[], timeoutMs: number): Promise<void> {
    if (!this.breaker.tryAcquire()) {
      this.observers.storeFailed('breaker_open')
      return Promise.reject(this.breakerOpenError())
    }
    this.inFlight++
    return new Promise<void>((resolve, reject) => {
      const wait = new StoreWait<void>(timeoutMs, new PendingReset(this, resolve, reject))
      let work: Promise<void>
      try {
        work = this.store.reset(targets)
      } catch (cause) {
        wait.fail(cause)
        return
      }
      work.then(
        () => wait.answer(undefined),
        (error: unknown) => wait.fail(error),
      )
    })
  }

  /** Waits for the calls in flight, then closes the store. */
  close(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => {
      this.drained = resolve
      if (this.inFlight === 0) resolve()
    }).then(async () => {
      this.dropLocalCounts()
      await this.store.close()
    })
    return this.closed
  }

  /**
   * The decision, once the observers have seen it: `observed` is the mark it began with,
   * `startedAt` when a timed decision that waited for its store began.
   */
  delivered(plan: DecisionPlan, decision: Decision, observed: number, startedAt?: number): Decision {
    if (observed !== NOT_OBSERVED) this.observers.end(plan.rule, decision, plan.operation, observed, startedAt)
    return decision
  }

  callEnded(): void {
    if (--this.inFlight === 0) this.drained?.()
  }

  /**
   * The decision the store's answer makes, a success for the breaker when `counted`; an answer
   * that does not fit the plan is the store's failure.
   */
  answerDecision(plan: DecisionPlan, result: StoreResult, counted: boolean): Decision {
    if (counted) this.breaker.success()
    if (this.notice.failing) this.notice.storeAnswered()
    try {
      return decisionOf(plan, result)
    } catch (cause) {
      return this.failureDecision(plan, cause, false)
    }
  }

  /**
   * Reports the failure, counted by the breaker when `counted` (unless it was one decision's own),
   * then makes the decision of the plan's policy. Throws for a refund, and whatever a
   * `store-error` listener throws.
   */
  failureDecision(plan: DecisionPlan, cause: unknown, counted: boolean): Decision {
    return this.decisionWithoutStore(plan, this.reported(cause, counted))
  }

  reported(cause: unknown, counted: boolean): TollgateError {
    const error = asStoreError(cause, this.recentError?.())
    if (counted) {
      if (isStoreDown(error)) this.breaker.failure(error)
      else this.breaker.inconclusive()
    }
    this.observers.storeFailed(storeErrorKindOf(cause, error))
    this.events.emit('store-error', error)
    return error
  }

  resetAnswered(): void {
    this.breaker.success()
    if (this.notice.failing) this.notice.storeAnswered()
  }

  // An answer after the timeout was still charged by the store; unless the policy let the
  // request through, take that charge back so a refused request consumes nothing.
  lateAnswer(plan: DecisionPlan, result: StoreResult): void {
    if (plan.policy === 'allow' || !result.allowed || !result.revert) return
    result.revert().catch((error: unknown) => {
      const storeError = asStoreError(error)
      this.observers.storeFailed(storeErrorKindOf(error, storeError))
      this.events.emit('store-error', storeError)
    })
  }

  /**
   * The decision of a store that keeps its state in the process; undefined when it needs the
   * shared store. Throws only for a call the plan cannot make (a rule charging none of its
   * identifiers); the store's own failure is the decision of the plan's policy.
   */
  private decideInProcess(plan: DecisionPlan): Decision | undefined {
    const { inProcess, evaluateSync } = this
    if (inProcess !== undefined) {
      const count = fillTargets(plan.rule.chain, plan.identifiers, plan.blocks, targets)
      try {
        const decision = inProcess[DECIDES_IN_PROCESS](plan, targets, count)
        if (decision !== undefined) return decision
      } catch (cause) {
        return this.failureDecision(plan, cause, false)
      }
    }
    if (evaluateSync === undefined) return undefined
    const request = requestOf(plan)
    let result: StoreResult | undefined
    try {
      result = evaluateSync(request)
    } catch (cause) {
      return this.failureDecision(plan, cause, false)
    }
    if (result === undefined) return undefined
    if (result.outage !== undefined) return this.outageDecision(plan, result, result.outage)
    return this.answerDecision(plan, result, false)
  }

  /** An in-process store decided without its shared state: its policy's decision, with why. */
  private outageDecision(
    plan: DecisionPlan,
    result: StoreResult,
    outage: NonNullable<StoreResult['outage']>,
  ): Decision {
    if (outage.policy !== 'local') return storeFailureDecision(plan.rule.name, plan.cost, outage.policy, outage.error)
    return fallbackDecisionOf(plan, result, outage.error)
  }

  private decisionWithoutStore(plan: DecisionPlan, error: TollgateError): Decision {
    // A write that gives back or settles: no policy stands in for it.
    if (plan.operation === 'refund' || plan.operation === 'charge') throw error
    const { policy } = plan
    if (policy === 'local') {
      this.localCounts ??= new LocalCounts(1, LOCAL_KEYS)
      return fallbackDecisionOf(plan, this.localCounts.evaluateTargets(requestOf(plan), localKeyOf, Date.now()), error)
    }
    if (policy === 'allow' && isStoreDown(error)) this.notice.decidedWithoutStore(error)
    return storeFailureDecision(plan.rule.name, plan.cost, policy, error)
  }

  private breakerOpenError(): TollgateError {
    const open = new TollgateError('TG_STORE', 'the store is failing: its circuit breaker is open')
    return asStoreError(open, this.recentError?.())
  }

  private dropLocalCounts(): void {
    this.localCounts = undefined
  }
}

/**
 * The targets of the decision being made in the process, written in place by each one: it runs
 * to its end before another begins.
 */
const targets: TargetSlot[] = []

/** The most keys the `'local'` policy counts, as many as a MemoryStore holds by default. */
const LOCAL_KEYS = 1_000_000
const localKeys = new KeyBuilder('')
const localKeyOf = (target: StoreTarget): string => localKeys.key(target.rule, target.algorithm, target.identifier)
