/**
 * Tells a middleware made for each request, as in
 * `app.use((req, res, next) => rateLimit(options)(req, res, next))`: every request then meets an
 * engine of its own (and, from `rules` or `windows`, a limiter and a store of its own) that counts
 * that request alone, so nothing is ever limited.
 *
 * An engine whose first request comes in the synchronous run it was made in, before any microtask,
 * was made for that request, or just before it by code that sends it one at once (a test's
 * `app.request`, `engine.check`). One engine so made proves nothing: a middleware made lazily, on
 * the first request, is made once. An engine per request shows in the next one of its rule, made
 * for a request too: the one before it is still open, has seen one request alone, which was
 * another, and the event loop has run a task since, as it does between two requests a server
 * receives. Code that makes engines and checks a request with each in a loop runs no task in
 * between (with an in-process store), and a test suite that makes an app per test mostly closes
 * it, or sends it more than one request.
 *
 * The process warns once. Past an engine's first request nothing is checked but a field, and no
 * engine is watched once the process has warned: the adapters' hot path affords that and no more
 * (no AsyncLocalStorage, no stack traces).
 */

/** Called with each request of an engine until it returns undefined, and then never again. */
export type RequestWatch = (request: unknown) => RequestWatch | undefined

export interface FirstRequestWatch {
  readonly watch: RequestWatch | undefined
  /** The engine was closed: what a test does, and an engine made per request never has done to it. */
  closed(): void
}

/** An engine whose first request came in the run it was made in. */
interface MadeForRequest {
  /** Weakly held: an engine per request must not keep each request alive until the next. */
  readonly request: WeakRef<object> | unknown
  /** It saw a request besides its first: made on first use, and used since. */
  usedAgain: boolean
  closed: boolean
  /** The event loop ran a task since its first request, as it does between two requests a server receives. */
  taskPassed: boolean
}

/**
 * The latest engine made for a request, by rule: a request may pass several middlewares made per
 * request, each of its own rule. Bounded, the oldest forgotten: rules are few, unless engines are
 * made lazily per tenant or so, which this need not follow.
 */
const latest = new Map<string, MadeForRequest>()
const MAX_RULES = 64
let warned = false

/**
 * The watch of a new engine applying `rule`; `warn` is called at most once in the process, on the
 * first request of the second engine in a row made per request.
 */
export function watchFirstRequest(rule: string | ((request: never) => unknown), warn: () => void): FirstRequestWatch {
  if (warned) return { watch: undefined, closed: () => {} }
  let fresh = true
  queueMicrotask(() => {
    fresh = false
  })
  let made: MadeForRequest | undefined
  const again: RequestWatch = () => {
    if (made) made.usedAgain = true
    return undefined
  }
  const first: RequestWatch = (request) => {
    if (!fresh || warned) return undefined
    const key = String(rule)
    const previous = latest.get(key)
    if (previous && isEnginePerRequest(previous, request)) {
      warned = true
      latest.clear()
      warn()
      return undefined
    }
    const current: MadeForRequest = { request: weakly(request), usedAgain: false, closed: false, taskPassed: false }
    made = current
    latest.delete(key)
    latest.set(key, current)
    if (latest.size > MAX_RULES) latest.delete(latest.keys().next().value as string)
    setTimeout(() => {
      current.taskPassed = true
    }, 0).unref?.()
    return again
  }
  return {
    watch: first,
    closed: () => {
      if (made) made.closed = true
    },
  }
}

function isEnginePerRequest(previous: MadeForRequest, request: unknown): boolean {
  return (
    previous.taskPassed &&
    !previous.closed &&
    !previous.usedAgain &&
    (previous.request instanceof WeakRef ? previous.request.deref() : previous.request) !== request
  )
}

function weakly(request: unknown): WeakRef<object> | unknown {
  return (typeof request === 'object' && request !== null) || typeof request === 'function'
    ? new WeakRef(request)
    : request
}
