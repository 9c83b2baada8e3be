import type { Decision } from './decision.js'
import { describeValue, TollgateError } from './errors.js'

/**
 * What a decision answers when the store fails or does not answer within its bound:
 * `'allow'` lets the request through (fail open), `'deny'` refuses it (fail closed), `'local'`
 * decides on an in-process store with the same rules until the store is back (each process then
 * counts on its own, so N processes admit up to N times the limit meanwhile).
 */
export type StoreErrorPolicy = 'allow' | 'deny' | 'local'

export const STORE_ERROR_POLICIES: readonly StoreErrorPolicy[] = ['allow', 'deny', 'local']

export function storeErrorPolicyOf(
  value: unknown,
  Failure: new (message: string) => Error,
  what: string,
): StoreErrorPolicy {
  if (!STORE_ERROR_POLICIES.includes(value as StoreErrorPolicy)) {
    throw new Failure(
      `${what} must be ${STORE_ERROR_POLICIES.map((p) => `'${p}'`).join(' or ')}, got ${describeValue(value)}`,
    )
  }
  return value as StoreErrorPolicy
}

/** Past about a minute a "bounded" wait bounds nothing. */
export function storeTimeoutOf(value: unknown, Failure: new (message: string) => Error, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 60_000) {
    throw new Failure(`${what} must be an integer number of milliseconds from 1 to 60000, got ${describeValue(value)}`)
  }
  return value
}

/** Any store failure as a Tollgate error with code TG_STORE, the original kept as `cause`. */
export function asStoreError(cause: unknown): TollgateError {
  if (cause instanceof TollgateError && cause.code === 'TG_STORE') return cause
  return new TollgateError('TG_STORE', `the store failed: ${(cause as Error)?.message ?? String(cause)}`, { cause })
}

/**
 * Calls the store and bounds the wait. A custom store that throws instead of rejecting is
 * treated the same; callers turn every failure into TG_STORE.
 */
export function callStore<T>(call: () => Promise<T>, timeoutMs: number, onLateAnswer?: (value: T) => void): Promise<T> {
  let work: Promise<T>
  try {
    work = call()
  } catch (error) {
    return Promise.reject(asStoreError(error))
  }
  return new Promise<T>((resolve, reject) => awaitStore(work, timeoutMs, resolve, reject, onLateAnswer))
}

/** How long a refused-for-failure client is asked to wait: about the time a store takes to come back from a blip. */
const RETRY_AFTER_STORE_ERROR_MS = 1_000

/**
 * Waits of one length begun in the same tick share one timer: under load a tick starts a whole
 * batch of decisions, and a timer each would cost more than an in-memory decision.
 */
class Cohort {
  /** Once every wait has settled the timer is gone: later waits need a cohort of their own. */
  done = false
  private pending = 0
  private readonly expirations: Array<() => void> = []
  private readonly timer: NodeJS.Timeout

  constructor(timeoutMs: number) {
    this.timer = setTimeout(() => {
      this.done = true
      const expirations = this.expirations.splice(0)
      for (const expire of expirations) expire()
    }, timeoutMs)
  }

  /** `expire` is called when the time is up, unless every wait was settled before. */
  add(expire: () => void): void {
    this.pending++
    this.expirations.push(expire)
  }

  settle(): void {
    if (--this.pending > 0) return
    this.done = true
    clearTimeout(this.timer)
    // A cleared timer and its cohort may already sit in V8's old generation, where they stay
    // until a full collection; whatever they still point at survives every young collection
    // until then. Dropping the waits here halved the client's CPU per decision under load.
    this.expirations.length = 0
  }
}

/** The cohort still taking waits, per timeout length; closed at the end of the tick. */
const openCohorts = new Map<number, Cohort>()
const closeCohorts = () => openCohorts.clear()

function cohortOf(timeoutMs: number): Cohort {
  let cohort = openCohorts.get(timeoutMs)
  if (cohort === undefined || cohort.done) {
    if (openCohorts.size === 0) process.nextTick(closeCohorts)
    cohort = new Cohort(timeoutMs)
    openCohorts.set(timeoutMs, cohort)
  }
  return cohort
}

/**
 * Hands `work`'s answer to `answered` or its failure to `failed`, unless `timeoutMs` passes
 * first: then `failed` gets a TG_STORE timeout error and a later answer goes to `late`. Exactly
 * one of `answered` and `failed` is called, once. The work itself cannot be cancelled (a command
 * already sent to Redis will still be answered), so its late rejection is observed here rather
 * than left unhandled. Callbacks rather than a promise: every decision waits here, and each
 * promise layer would cost an allocation and a microtask.
 */
export function awaitStore<T>(
  work: Promise<T>,
  timeoutMs: number,
  answered: (value: T) => void,
  failed: (error: unknown) => void,
  late?: (value: T) => void,
): void {
  let state: 'waiting' | 'answered' | 'expired' = 'waiting'
  const cohort = cohortOf(timeoutMs)
  cohort.add(() => {
    if (state !== 'waiting') return
    state = 'expired'
    failed(new TollgateError('TG_STORE', `the store did not answer within ${timeoutMs} ms`))
  })
  work.then(
    (value) => {
      if (state === 'expired') {
        late?.(value)
        return
      }
      state = 'answered'
      cohort.settle()
      answered(value)
    },
    (error: unknown) => {
      if (state === 'expired') return
      state = 'answered'
      cohort.settle()
      failed(error)
    },
  )
}

export function storeFailureDecision(rule: string, cost: number, policy: 'allow' | 'deny', cause: unknown): Decision {
  const error = asStoreError(cause)
  const allowed = policy === 'allow'
  return {
    allowed,
    reason: allowed ? 'store-error-allowed' : 'store-error-denied',
    rule,
    cost,
    retryAfterMs: allowed ? 0 : RETRY_AFTER_STORE_ERROR_MS,
    nowMs: Date.now(),
    windows: [],
    error,
  }
}
