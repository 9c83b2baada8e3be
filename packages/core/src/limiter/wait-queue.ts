import type { Decision } from '../rules/decision.js'
import { TollgateError } from '../support/errors.js'
import { fitsTooLateError, neverFitsError, waitClosedError, waitTimeoutError } from './wait-errors.js'
import type { Waiter, WaiterOwner } from './waiter.js'

/** What a queue asks of its limiter. */
export interface WaitCalls {
  /** One `consume` for the waiter: the decision at once from an in-process store, else its promise. */
  consume(waiter: Waiter): Decision | Promise<Decision>
  /** Gives back what a `consume` charged for a waiter that had ended by the time it answered. */
  refund(waiter: Waiter): void
}

/**
 * A refusal that says to retry at once (a custom store's answer can) is retried a millisecond
 * on, so that a queue never asks its store in a loop that holds the process.
 */
const LEAST_RETRY_MS = 1

/**
 * The waits for one rule and set of identifiers, first come first served: only the head asks
 * the store, and the waiters behind it, whatever their cost, wait for it to be served or to
 * leave. A refusal's `retryAfterMs` sets the one timer of the queue, and its firing the next
 * try; between the two the queue makes no store call. Between turns of the event loop the queue
 * has one store call under way, or one timer set, or neither once it is empty or closed.
 */
export class WaitQueue implements WaiterOwner {
  private head: Waiter | undefined
  private tail: Waiter | undefined
  /** The head's next try, when its last one was refused. */
  private retry: NodeJS.Timeout | undefined
  /** The waiter whose store call is under way: it may have ended meanwhile, aborted say. */
  private asked: Waiter | undefined
  /** While the queue serves waiters one after another: a waiter ending then does not start another round. */
  private serving = false
  private closed = false

  constructor(
    private readonly calls: WaitCalls,
    /** Told once the queue holds nothing: no waiter, no call under way, no timer. */
    private readonly emptied: (queue: WaitQueue) => void,
  ) {}

  push(waiter: Waiter): void {
    waiter.previous = this.tail
    if (this.tail) this.tail.next = waiter
    else this.head = waiter
    this.tail = waiter
    if (!this.serving) this.serve()
  }

  ended(waiter: Waiter): void {
    if (waiter === this.head) this.stopRetry()
    const { previous, next } = waiter
    if (previous) previous.next = next
    else this.head = next
    if (next) next.previous = previous
    else this.tail = previous
    waiter.previous = waiter.next = undefined
    if (!this.serving) this.serve()
  }

  expired(waiter: Waiter): void {
    // A retry is set only when it is due by the head's deadline: when both come in the same
    // millisecond, the try decides, so that units that fit right at the deadline are taken.
    if (waiter === this.head && this.retry !== undefined) return
    waiter.fail(waitTimeoutError(waiter.rule, waiter.cost, waiter.settings.maxWaitMs))
  }

  /**
   * Ends every wait with TG_CLOSED, but the one whose store call is under way: it takes that
   * call's answer, as the limiter's calls in flight complete on `close()`.
   */
  close(): void {
    this.closed = true
    this.stopRetry()
    this.serving = true
    let waiter = this.head
    while (waiter !== undefined) {
      const next = waiter.next
      if (waiter !== this.asked) waiter.fail(waitClosedError(waiter.rule))
      waiter = next
    }
    this.serving = false
    this.serve()
  }

  /** Asks for the head, and for each next head while the store lets them through at once. */
  private serve(): void {
    this.serving = true
    try {
      while (this.head !== undefined && this.asked === undefined && this.retry === undefined && !this.closed) {
        const waiter = this.head
        let answer: Decision | Promise<Decision>
        try {
          answer = this.calls.consume(waiter)
        } catch (error) {
          waiter.fail(error)
          continue
        }
        if (answer instanceof Promise) {
          this.asked = waiter
          answer.then(
            (decision) => this.answered(waiter, decision),
            (error: unknown) => this.answered(waiter, undefined, error),
          )
          break
        }
        this.take(waiter, answer)
      }
    } finally {
      this.serving = false
    }
    if (this.head === undefined && this.asked === undefined) this.emptied(this)
  }

  private answered(waiter: Waiter, decision: Decision | undefined, error?: unknown): void {
    this.asked = undefined
    this.serving = true
    try {
      if (decision === undefined) waiter.fail(error)
      else this.take(waiter, decision)
    } finally {
      this.serving = false
    }
    this.serve()
  }

  /** Serves the waiter, ends it, or sets the timer of its next try. */
  private take(waiter: Waiter, decision: Decision): void {
    if (waiter.ended) {
      // Aborted or timed out while its call was under way: what the call charged would be spent
      // on no one, and `dry-run`, fail-open and local decisions charged the store nothing.
      if (decision.allowed && decision.reason === 'ok' && decision.cost > 0) this.calls.refund(waiter)
      return
    }
    if (decision.allowed) {
      waiter.succeed(decision)
      return
    }
    const ending = this.endingOf(waiter, decision)
    if (ending !== undefined) waiter.fail(ending)
    else this.retry = setTimeout(this.retried, retryDelayOf(decision))
  }

  /** Why a refused waiter ends now rather than try again, if it does. */
  private endingOf(waiter: Waiter, decision: Decision): Error | undefined {
    // Fail closed means the store is not answering: retrying on a timer would keep asking it
    // for every waiter, each of which would then wait out its deadline rather than hear why.
    if (decision.reason === 'store-error-denied') {
      return decision.error ?? new TollgateError('TG_STORE', 'the store failed')
    }
    if (this.closed) return waitClosedError(waiter.rule)
    if (decision.retryAfterMs === Number.POSITIVE_INFINITY) {
      const tooSmall = decision.windows.filter((w) => w.failed && w.limit < waiter.cost)
      return neverFitsError(waiter.rule, waiter.cost, tooSmall)
    }
    const delay = retryDelayOf(decision)
    const left = waiter.deadline - performance.now()
    if (delay > left) return fitsTooLateError(waiter.rule, waiter.cost, delay, left, waiter.settings.maxWaitMs)
    return undefined
  }

  private readonly retried = (): void => {
    this.retry = undefined
    this.serve()
  }

  private stopRetry(): void {
    if (this.retry === undefined) return
    clearTimeout(this.retry)
    this.retry = undefined
  }
}

function retryDelayOf(decision: Decision): number {
  return Math.max(LEAST_RETRY_MS, decision.retryAfterMs)
}
