import { inspect } from 'node:util'
import {
  createRateLimit,
  type Decision,
  type RateLimit,
  type RateLimitOptions,
  TollgateConfigError,
} from '@tollgate/core'
import type { Context, Middleware } from 'koa'

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
   * Throw the 429 (or 503) as an `HttpError` for the app's error handling, carrying `status`,
   * `expose`, `headers`, `problem` and `decision`; or, with `false`, respond directly with the
   * `application/problem+json` body.
   * @default true
   * @example rateLimit({ windows: [{ limit: 5, period: '1m' }], throw: false })
   */
  throw?: boolean
}

export interface RateLimitMiddleware extends Middleware {
  /** The engine deciding for this middleware: its options, limiter and rule. */
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
  const limit = createRateLimit<Context>(coreOptions)

  const middleware: Middleware = async (ctx, next) => {
    const verdict = await limit.check(ctx, {
      ip: ctx.ip,
      forwardedFor: ctx.get('x-forwarded-for') || undefined,
      proxyTrusted: Boolean(ctx.app.proxy),
    })
    ctx.set(verdict.headers)
    if (verdict.action === 'continue') {
      ctx.state.rateLimit = verdict.decision
      await next()
    } else if (throwError) {
      const { problem, decision, headers } = verdict
      // Koa's default error handler clears every header and then sets the error's own, so they travel with it.
      ctx.throw(verdict.status, typeof problem.detail === 'string' ? problem.detail : problem.title, {
        headers,
        expose: true,
        problem,
        decision,
      })
    } else {
      ctx.status = verdict.status
      ctx.type = verdict.contentType
      ctx.body = verdict.body
    }
  }
  return Object.assign(middleware, { limit, close: () => limit.close() })
}

/** Core rejects keys it does not know, so the Koa-only option leaves before the rest reach it. */
function splitThrow(options: KoaRateLimitOptions): [unknown, RateLimitOptions<Context>] {
  // Anything without the key, objects or not, goes to core as given, for core's own checks.
  if (options == null || !Object.hasOwn(options, 'throw')) return [true, options]
  const { throw: throwError = true, ...coreOptions } = options
  return [throwError, coreOptions]
}
