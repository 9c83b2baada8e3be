import type { Decision } from '../rules/decision.js'
import type { Identifiers } from '../stores/shared/decision-targets.js'
import { waitAbortedError } from './wait-errors.js'
import type { WaitSettings } from './wait-options.js'

/** The queue a waiter stands in, as the waiter sees it. */
export interface WaiterOwner {
  /** The waiter's promise has settled: it leaves the queue. */
  ended(waiter: Waiter): void
  /** Its `maxWaitMs` has passed. */
  expired(waiter: Waiter): void
}

/**
 * One call of `limiter.wait`: its promise, and what it holds until that settles (a timer for
 * its deadline, a listener on its signal), let go of as it settles, however it does.
 */
export class Waiter {
  /** Its neighbours in its queue, so that a waiter aborted in the middle leaves without a search. */
  previous: Waiter | undefined
  next: Waiter | undefined
  readonly done: Promise<Decision>
  /** `performance.now()` once `maxWaitMs` has passed: a monotonic clock, which a wall clock set back cannot stretch. */
  readonly deadline: number
  private settled = false
  private resolve!: (decision: Decision) => void
  private reject!: (error: unknown) => void
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly owner: WaiterOwner,
    readonly rule: string,
    readonly identifiers: Identifiers,
    readonly settings: WaitSettings,
  ) {
    this.deadline = performance.now() + settings.maxWaitMs
    this.done = new Promise<Decision>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }

  get ended(): boolean {
    return this.settled
  }

  get cost(): number {
    return this.settings.call.cost
  }

  /**
   * Starts the deadline's timer and listens to the signal. Called once the first try is made,
   * since most waits that find room at once end in it and need neither. The timer is not unref'd:
   * a program waiting for a slot has work left to do.
   */
  watch(): void {
    if (this.settled) return
    this.timer = setTimeout(this.expire, Math.max(0, this.deadline - performance.now()))
    this.settings.signal?.addEventListener('abort', this.abort, { once: true })
  }

  succeed(decision: Decision): void {
    if (!this.end()) return
    this.resolve(decision)
    this.owner.ended(this)
  }

  fail(error: unknown): void {
    if (!this.end()) return
    this.reject(error)
    this.owner.ended(this)
  }

  /** Settled before the queue hears of it, so that the waiter after it, served then, settles after it. */
  private end(): boolean {
    if (this.settled) return false
    this.settled = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.settings.signal?.removeEventListener('abort', this.abort)
    return true
  }

  private readonly expire = (): void => {
    this.timer = undefined
    this.owner.expired(this)
  }

  private readonly abort = (): void => {
    this.fail(waitAbortedError(this.rule, this.settings.signal as AbortSignal))
  }
}
