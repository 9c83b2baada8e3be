import type { Decision } from '../decision.js'
import { describeValue, TollgateArgumentError } from '../errors.js'
import type { Rule } from '../rules.js'
import type { StoreOperation } from '../stores/store.js'
import type { DecisionObserver, StoreErrorKind } from './decision-observer.js'

/** What `begin` returns for a decision no observer sees. */
export const NOT_OBSERVED = -1
/** What `begin` returns for an observed decision that is not timed. */
const UNTIMED = 0

/** The most observers one limiter takes: each costs every decision a call. */
const MAX_OBSERVERS = 16

/**
 * The observers attached to one limiter. Decisions see a single `current` observer, undefined
 * while none is attached, so that an unobserved decision costs one predictable branch.
 */
export class Observers {
  current: DecisionObserver | undefined
  private attached: readonly DecisionObserver[] = []
  private timeEvery = 0
  private untilTimed = 0

  /** Attaches the observer; the function returned detaches it (again: nothing happens). */
  add(observer: DecisionObserver): () => void {
    checkObserver(observer)
    if (this.attached.includes(observer)) {
      throw new TollgateArgumentError('limiter.observe: this observer is attached already; it would count twice')
    }
    if (this.attached.length >= MAX_OBSERVERS) {
      throw new TollgateArgumentError(`limiter.observe: a limiter takes at most ${MAX_OBSERVERS} observers`)
    }
    this.update([...this.attached, observer])
    return () => this.update(this.attached.filter((other) => other !== observer))
  }

  /**
   * Called as a decision begins: NOT_OBSERVED, UNTIMED, or the time it began (`performance.now()`)
   * when it is the one in `timeEvery` to time.
   */
  begin(operation: StoreOperation): number {
    if (this.current === undefined || operation !== 'consume') return NOT_OBSERVED
    if (this.timeEvery === 0 || --this.untilTimed > 0) return UNTIMED
    this.untilTimed = this.timeEvery
    return performance.now()
  }

  /** Called with the decision `begin` was called for, unless it returned NOT_OBSERVED. */
  end(rule: Rule, decision: Decision, startedAt: number): void {
    this.current?.decided(rule, decision, startedAt > UNTIMED ? (performance.now() - startedAt) / 1000 : Number.NaN)
  }

  storeFailed(kind: StoreErrorKind): void {
    this.current?.storeFailed(kind)
  }

  private update(attached: readonly DecisionObserver[]): void {
    this.attached = attached
    this.current = attached.length <= 1 ? attached[0] : new EveryObserver(attached)
    const every = attached.map((observer) => observer.timeEvery).filter((n) => n > 0)
    this.timeEvery = every.length === 0 ? 0 : Math.min(...every)
    this.untilTimed = this.timeEvery
  }
}

/** Several observers as one: each call goes to every one of them, in the order attached. */
class EveryObserver implements DecisionObserver {
  readonly timeEvery = 0

  constructor(private readonly observers: readonly DecisionObserver[]) {}

  decided(rule: Rule, decision: Decision, seconds: number): void {
    for (const observer of this.observers) observer.decided(rule, decision, seconds)
  }

  storeFailed(kind: StoreErrorKind): void {
    for (const observer of this.observers) observer.storeFailed(kind)
  }
}

function checkObserver(observer: unknown): asserts observer is DecisionObserver {
  const candidate = observer as Partial<DecisionObserver> | null
  if (typeof candidate?.decided !== 'function' || typeof candidate.storeFailed !== 'function') {
    throw new TollgateArgumentError(
      `limiter.observe takes an observer with decided and storeFailed methods, such as new DecisionCounts(), got ${describeValue(observer)}`,
    )
  }
  const { timeEvery } = candidate
  if (typeof timeEvery !== 'number' || !Number.isSafeInteger(timeEvery) || timeEvery < 0) {
    throw new TollgateArgumentError(
      `limiter.observe: the observer's timeEvery must be a whole number ≥ 0 (0: time no decision), got ${describeValue(timeEvery)}`,
    )
  }
}
