import { setImmediate } from 'node:timers'
import type { ReplyWatch } from '../stores/store.js'
import { describeValue, TollgateError } from '../support/errors.js'

/** Past about a minute a "bounded" wait bounds nothing. */
export function storeTimeoutOf(value: unknown, Failure: new (message: string) => Error, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 60_000) {
    throw new Failure(`${what} must be an integer number of milliseconds from 1 to 60000, got ${describeValue(value)}`)
  }
  return value
}

/** Whatever waits on a `StoreWait`: exactly one of `answered` and `failed` is called, once. */
export interface WaitHandler<T> {
  answered(value: T): void
  failed(error: unknown): void
  /** An answer that came after the timeout had failed the wait. */
  late?(value: T): void
}

/**
 * Waits of one length begun within the same millisecond share one timer: under load each
 * millisecond starts many decisions (an HTTP server, one per request, each in a tick of its
 * own), and a timer each would cost more than an in-memory decision. A wait that joins a cohort
 * begun up to a millisecond before it may therefore be judged up to a millisecond early.
 *
 * The timer only asks the waits to judge themselves, and not at once: timers run before the
 * event loop reads its sockets, so after a turn that kept the process busy past the bound, the
 * replies that came meanwhile are still unread. The waits judge once the loop has read them
 * (`setImmediate` runs after the poll phase), from `node:timers`, which test fake timers leave
 * alone.
 */
class Cohort {
  /** Once every wait has settled the timer is gone: later waits need a cohort of their own. */
  done = false
  private pending = 0
  private readonly waits: Array<StoreWait<never>> = []
  private readonly timer: NodeJS.Timeout

  constructor(
    timeoutMs: number,
    /** `Date.now()` when the cohort began: a clock tests can fake along with the timers. */
    readonly startedAt: number,
  ) {
    this.timer = setTimeout(() => {
      this.done = true
      const waits = this.waits.splice(0)
      setImmediate(() => {
        for (const wait of waits) wait.judge()
      })
    }, timeoutMs)
  }

  /** The wait expires when the time is up, unless every wait was settled before. */
  add(wait: StoreWait<never>): void {
    this.pending++
    this.waits.push(wait)
  }

  settle(): void {
    if (--this.pending > 0) return
    this.done = true
    clearTimeout(this.timer)
    // A cleared timer and its cohort may already sit in V8's old generation, where they stay
    // until a full collection; whatever they still point at survives every young collection
    // until then, so the waits are dropped here (measured: bench/README.md).
    this.waits.length = 0
  }
}

/** The errors of waits that timed out: told apart from the store's own failures without reading messages. */
const timeouts = new WeakSet<object>()

/** Whether the error is the one a wait failed with because the store did not answer in time. */
export function isTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && timeouts.has(error)
}

/** The latest cohort per timeout length; a few lengths at most in practice, bounded anyway. */
const openCohorts = new Map<number, Cohort>()
const MAX_OPEN_COHORTS = 64

function cohortOf(timeoutMs: number): Cohort {
  const now = Date.now()
  let cohort = openCohorts.get(timeoutMs)
  // Either way round: a clock stepped back must not keep one cohort open.
  if (cohort === undefined || cohort.done || Math.abs(now - cohort.startedAt) >= 1) {
    if (openCohorts.size >= MAX_OPEN_COHORTS) openCohorts.clear()
    cohort = new Cohort(timeoutMs, now)
    openCohorts.set(timeoutMs, cohort)
  }
  return cohort
}

/**
 * One bounded wait for the store: hands its answer to the handler, or its failure, unless the
 * store is silent for `timeoutMs` first; the handler then gets a TG_STORE timeout error, and a
 * later answer goes to `late`. Once the store says the request is on the wire (`sent`), the bound
 * runs on that connection's silence: a request queued behind others that Redis keeps answering
 * waits on, and one whose connection said nothing for `timeoutMs` fails. Before that, or for a
 * store that never says so, the bound runs from the wait's start. A store that takes a receiver
 * is given the wait itself, so that a decision waits with one object rather than a promise, its
 * continuations and their closures. The work itself cannot be cancelled (a command already sent
 * to Redis will still be answered).
 */
export class StoreWait<T> {
  private state: 'waiting' | 'answered' | 'expired' = 'waiting'
  private cohort: Cohort
  private watch: ReplyWatch | undefined = undefined

  constructor(
    private readonly timeoutMs: number,
    private readonly handler: WaitHandler<T>,
  ) {
    this.cohort = cohortOf(timeoutMs)
    this.cohort.add(this as StoreWait<never>)
  }

  sent(watch: ReplyWatch): void {
    this.watch = watch
  }

  answer(value: T): void {
    if (this.state === 'expired') {
      this.handler.late?.(value)
      return
    }
    if (this.state !== 'waiting') return
    this.state = 'answered'
    this.cohort.settle()
    this.handler.answered(value)
  }

  fail(error: unknown): void {
    if (this.state !== 'waiting') return
    this.state = 'answered'
    this.cohort.settle()
    this.handler.failed(error)
  }

  /**
   * Called once the cohort's time is up: fails the wait if its connection has been silent that
   * long (or, not on the wire, if that long has passed), else waits out the rest of the bound.
   */
  judge(): void {
    if (this.state !== 'waiting') return
    if (this.watch !== undefined) {
      const silentMs = this.watch.silentMs(performance.now())
      // A cohort may be judged up to a millisecond early: the same allowance here.
      if (silentMs < this.timeoutMs - 1) {
        this.cohort = cohortOf(Math.ceil(this.timeoutMs - silentMs))
        this.cohort.add(this as StoreWait<never>)
        return
      }
    }
    this.state = 'expired'
    const error = new TollgateError('TG_STORE', `the store did not answer within ${this.timeoutMs} ms`)
    timeouts.add(error)
    this.handler.failed(error)
  }
}
