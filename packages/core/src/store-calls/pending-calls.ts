import type { Decision } from '../rules/decision.js'
import type { StoreResult } from '../stores/store.js'
import type { TollgateError } from '../support/errors.js'
import type { DecisionPlan } from './decision-plan.js'
import { TIMED } from './observers.js'
import type { WaitHandler } from './store-wait.js'

/** What a call waiting for the store hands its outcome to: the StoreCaller that made it. */
export interface CallSettler {
  readonly observers: { readonly timedAt: number }
  answerDecision(plan: DecisionPlan, result: StoreResult, counted: boolean): Decision
  failureDecision(plan: DecisionPlan, cause: unknown, counted: boolean): Decision
  delivered(plan: DecisionPlan, decision: Decision, observed: number, startedAt?: number): Decision
  decisionEnded(): void
  lateAnswer(plan: DecisionPlan, result: StoreResult): void
  callEnded(): void
  resetAnswered(): void
  reported(cause: unknown, counted: boolean): TollgateError
}

/**
 * One decision waiting for the store: its answer, failure or timeout settles the decision's
 * promise, once. An object rather than closures: every decision on Redis waits in one.
 */
export class PendingDecision implements WaitHandler<StoreResult> {
  /**
   * When the decision began, if it is the one in `timeEvery` that is timed. Undefined otherwise,
   * not 0: a field that holds a number for every decision is boxed for every decision.
   */
  private readonly startedAt: number | undefined

  constructor(
    private readonly caller: CallSettler,
    private readonly plan: DecisionPlan,
    private readonly resolve: (decision: Decision) => void,
    private readonly reject: (error: unknown) => void,
    /** The mark the decision began with. */
    private readonly observed: number,
  ) {
    this.startedAt = observed === TIMED ? caller.observers.timedAt : undefined
  }

  answered(result: StoreResult): void {
    this.settle(true, result)
  }

  failed(cause: unknown): void {
    this.settle(false, cause)
  }

  /** The decision of the store's answer (`answered`) or of its failure, to the decision's promise. */
  private settle(answered: boolean, outcome: unknown): void {
    const { caller, plan } = this
    let decision: Decision
    try {
      const made = answered
        ? caller.answerDecision(plan, outcome as StoreResult, true)
        : caller.failureDecision(plan, outcome, true)
      decision = caller.delivered(plan, made, this.observed, this.startedAt)
    } catch (error) {
      this.reject(error)
      return
    } finally {
      caller.decisionEnded()
    }
    this.resolve(decision)
  }

  late(result: StoreResult): void {
    this.caller.lateAnswer(this.plan, result)
  }
}

export class PendingReset implements WaitHandler<void> {
  constructor(
    private readonly caller: CallSettler,
    private readonly resolve: () => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  answered(): void {
    this.caller.callEnded()
    try {
      this.caller.resetAnswered()
    } catch (error) {
      this.reject(error)
      return
    }
    this.resolve()
  }

  failed(cause: unknown): void {
    this.caller.callEnded()
    try {
      this.reject(this.caller.reported(cause, true))
    } catch (listenerError) {
      // A 'store-error' listener threw: that error is the caller's to see.
      this.reject(listenerError)
    }
  }
}

/** A decision queued for room in the backlog. */
export interface QueuedDecision {
  plan: DecisionPlan
  resolve: (decision: Decision) => void
  reject: (error: unknown) => void
  observed: number
}
