import { performance } from 'node:perf_hooks'
import type { Decision } from '../rules/decision.js'
import type { Rule } from '../rules/rules.js'
import type { StoreOperation } from '../stores/store.js'
import { describeValue, TollgateArgumentError } from '../support/errors.js'
import type { DecisionObserver, StoreErrorKind } from './decision-observer.js'

/**
 * What a decision reads as it begins (`state`) and carries to its end: no observer is attached.
 * Small integers, so that nothing the decision path carries is ever a boxed number.
 */
export const NOT_OBSERVED = 0
/** Observers are attached. */
export const OBSERVED = 1
/** As `state`: the next `consume` decision is the one in `timeEvery` to time. As a mark: this one is. */
export const TIMED = 2

/** The most observers one limiter takes: each costs every decision a call. */
const MAX_OBSERVERS = 16

/**
 * The observers attached to one limiter. A decision reads `state` as it begins and, unless it is
 * NOT_OBSERVED, calls `end` with its decision: an unobserved decision costs two predictable
 * branches and no call.
 */
export class Observers {
  state = NOT_OBSERVED
  /** The one observer decisions go to: the only one attached, or one that hands each call to all of them. */
  current: DecisionObserver | undefined
  /**
   * When the last decision `startTiming` was called for began. `performance` is perf_hooks' own:
   * the global one is a getter Node installs, called on every read.
   */
  timedAt = 0
  private attached: readonly DecisionObserver[] = []
  private timeEvery = 0
  /** `consume` decisions to end before the next one is timed. */
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

  /** Called as a decision begins while `state` is TIMED: its mark, TIMED for a `consume`. */
  startTiming(operation: StoreOperation): number {
    if (operation !== 'consume') return OBSERVED
    this.state = OBSERVED
    this.timedAt = performance.now()
    return TIMED
  }

  /**
   * Called as an observed decision ends, with the mark it carried. `startedAt`: the `timedAt` of
   * a timed decision that waited for its store; the others end before another decision begins.
   */
  end(rule: Rule, decision: Decision, operation: StoreOperation, mark: number, startedAt?: number): void {
    const observer = this.current
    if (observer === undefined || operation !== 'consume') return
    if (this.timeEvery > 0 && --this.untilTimed <= 0) {
      this.untilTimed = this.timeEvery
      this.state = TIMED
    }
    // The time is read before the observer sees the decision, so that it is the limiter's alone.
    if (mark === TIMED) this.endTimed(observer, startedAt ?? this.timedAt)
    observer.decided(rule, decision)
  }

  private endTimed(observer: DecisionObserver, startedAt: number): void {
    observer.timed?.((performance.now() - startedAt) / 1000)
  }

  storeFailed(kind: StoreErrorKind): void {
    this.current?.storeFailed(kind)
  }

  private update(attached: readonly DecisionObserver[]): void {
    this.attached = attached
    this.current = attached.length <= 1 ? attached[0] : new EveryObserver(attached)
    const every = attached.map((observer) => observer.timeEvery).filter((n) => n > 0)
    this.timeEvery = every.length === 0 ? 0 : Math.min(...every)
    // The timeEvery-th decision from now is the first timed.
    this.untilTimed = this.timeEvery - 1
    this.state =
      this.current === undefined ? NOT_OBSERVED : this.timeEvery > 0 && this.untilTimed === 0 ? TIMED : OBSERVED
  }
}

/** Several observers as one: each call goes to every one of them, in the order attached. */
class EveryObserver implements DecisionObserver {
  readonly timeEvery = 0

  constructor(private readonly observers: readonly DecisionObserver[]) {}

  decided(rule: Rule, decision: Decision): void {
    for (const observer of this.observers) observer.decided(rule, decision)
  }

  timed(seconds: number): void {
    for (const observer of this.observers) observer.timed?.(seconds)
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
  if (timeEvery > 0 && typeof candidate.timed !== 'function') {
    throw new TollgateArgumentError(
      `limiter.observe: an observer with timeEvery ${timeEvery} needs a timed(seconds) method to take the times, got ${describeValue(candidate.timed)}`,
    )
  }
}
