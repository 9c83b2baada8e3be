import { inspect } from 'node:util'
import {
  createRateLimit,
  type Decision,
  type RateLimit,
  type RateLimitOptions,
  type RateLimitVerdict,
  TollgateConfigError,
} from '@tollgate/core'
import type { Context, Middleware, Next } from 'koa'

export type { Decision, RateLimitOptions } from '@tollgate/core'
export { byIpAndUser, ipIdentifier, userIdentifier } from '@tollgate/core'

declare module 'koa' {
  interface DefaultState {
    /** The decision for this request, set by `rateLimit` when it lets the request through; undefined when skipped. */
    rateLimit?: Decision
  }
}

/** The options of `rateLimit`: `@tollgate/core`'s HTTP options, with Koa's `ctx` as the request, and `throw`. */
export interface KoaRateLimitOptions extends RateLimitOptions<Context> {
  /**
   * With `false`, the middleware answers a refusal itself, with the `application/problem+json`
   * body Express and Fastify answer, whatever error handling the app has. With `true`, it throws
   * the 429 (or 503) as an `HttpError` for the app's error handling to shape, carrying `status`,
   * `expose`, `headers`, `problem` and `decision`.
   * @default false
   * @example rateLimit({ windows: [{ limit: 5, period: '1m' }], throw: true })
   */
  throw?: boolean
}

export interface RateLimitMiddleware extends Middleware {
  /** The engine deciding for this middleware: its options, limiter and rule. */
  readonly engine: RateLimit<Context>
  /** @deprecated The same as `engine`: a name that read as a number. */
  readonly limit: RateLimit<Context>
  /** Closes the limiter if this middleware made it (from `rules` or `windows`); a `limiter` passed in stays open. */
  close(): Promise<void>
}

/**
 * Koa middleware that charges each request against a rule, sets the rate limit headers, and
 * refuses with 429 (or 503 when the store fails and `onStoreError` is `'deny'`). Every option is
 * checked here, so a bad one throws `TollgateConfigError` at startup.
 * @example router.post('/login', rateLimit({ windows: [{ limit: 5, period: '1m' }] }), login)
 */
export function rateLimit(options: KoaRateLimitOptions): RateLimitMiddleware {
  const [throwError, coreOptions] = splitThrow(options)
  if (typeof throwError !== 'boolean')
    throw new TollgateConfigError(`option throw must be a boolean, got ${inspect(throwError)}`)
  const limit = createRateLimit<Context>(coreOptions, KOA_OPTIONS)

  // A verdict reached in the process is applied at once and the request goes on in the same
  // turn; one that waited comes in a promise (core's checkNow). Koa makes a promise of whatever
  // a middleware returns or throws.
  const middleware: Middleware = (ctx, next) => {
    const verdict = limit.checkNow(ctx, {
      ip: ctx.ip,
      forwardedFor: ctx.get('x-forwarded-for') || undefined,
      proxyTrusted: Boolean(ctx.app.proxy),
      socketAddress: ctx.req.socket.remoteAddress,
      response: ctx.res,
      method: ctx.method,
      // koa-mount strips its path from ctx.url.
      url: ctx.originalUrl,
    })
    if (verdict instanceof Promise) return verdict.then((settled) => applied(ctx, next, settled, throwError))
    return applied(ctx, next, verdict, throwError)
  }
  return Object.assign(middleware, { engine: limit, limit, close: () => limit.close() })
}

const KOA_OPTIONS = ['throw']

/** Sets the headers, then hands the request on (the promise of what follows) or answers it. */
function applied(
  ctx: Context,
  next: Next,
  verdict: RateLimitVerdict,
  throwError: boolean,
): Promise<unknown> | undefined {
  ctx.set(verdict.headers)
  if (verdict.action === 'continue') {
    ctx.state.rateLimit = verdict.decision
    let after: Promise<unknown>
    try {
      after = Promise.resolve(next())
    } catch (error) {
      throw withHeaders(error, verdict.headers)
    }
    return after.catch((error: unknown) => {
      throw withHeaders(error, verdict.headers)
    })
  }
  if (throwError) {
    const { problem, decision, headers, contentType, body } = verdict
    // Koa's default error handler clears every header and then sets the error's own, so they travel with it.
    ctx.throw(verdict.status, typeof problem.detail === 'string' ? problem.detail : problem.title, {
      headers,
      expose: true,
      problem,
      decision,
      contentType,
      body,
    })
  }
  ctx.status = verdict.status
  ctx.type = verdict.contentType
  ctx.body = verdict.body
  return undefined
}

/** Core rejects keys it does not know, so the Koa-only option leaves before the rest reach it. */
function splitThrow(options: KoaRateLimitOptions): [unknown, RateLimitOptions<Context>] {
  // Anything without the key, objects or not, goes to core as given, for core's own checks.
  if (options == null || !Object.hasOwn(options, 'throw')) return [false, options]
  const { throw: throwError = false, ...coreOptions } = options
  return [throwError, coreOptions]
}

/**
 * A later middleware's error carries the rate limit headers too: Koa's default error handler
 * clears every header before it sets the error's own, which Express and Fastify never do. The
 * error's own fields win over ours.
 */
function withHeaders(error: unknown, headers: Record<string, string>): unknown {
  if (typeof error !== 'object' || error === null || Object.keys(headers).length === 0) return error
  const own = (error as { headers?: unknown }).headers
  Reflect.set(error, 'headers', typeof own === 'object' && own !== null ? { ...headers, ...own } : headers)
  return error
}
