import {
  createRateLimit,
  type Decision,
  type RateLimit,
  type RateLimitOptions,
  type RateLimitVerdict,
} from '@tollgate/core'
import type { NextFunction, Request, RequestHandler, Response } from 'express'

export type { Decision, RateLimitOptions } from '@tollgate/core'
export { byIpAndUser, ipIdentifier, userIdentifier } from '@tollgate/core'

declare global {
  namespace Express {
    interface Locals {
      /** The decision for this request, set by `rateLimit` when it lets the request through; undefined when skipped. */
      rateLimit?: Decision
    }
  }
}

/** The options of `rateLimit`: `@tollgate/core`'s HTTP options, with Express's `req` as the request. */
export type ExpressRateLimitOptions = RateLimitOptions<Request>

export interface RateLimitMiddleware extends RequestHandler {
  /** The engine deciding for this middleware: its options, limiter and rule. */
  readonly engine: RateLimit<Request>
  /** @deprecated The same as `engine`: a name that read as a number. */
  readonly limit: RateLimit<Request>
  /** Closes the limiter if this middleware made it (from `rules` or `windows`); a `limiter` passed in stays open. */
  close(): Promise<void>
}

/**
 * Express middleware that charges each request against a rule, sets the rate limit headers, and
 * answers 429 (413 for a cost that can never fit, 503 when the store fails and `onStoreError` is
 * `'deny'`) with a problem+json body, or with the response `refusal` builds.
 * Every option is checked here, so a bad one throws `TollgateConfigError` at startup.
 * @example app.post('/login', rateLimit({ windows: [{ limit: 5, period: '1m' }] }), login)
 */
export function rateLimit(options: ExpressRateLimitOptions): RateLimitMiddleware {
  const limit = createRateLimit<Request>(options)
  // A verdict reached in the process is applied at once and the request goes on in the same
  // turn; one that waited comes in a promise (core's checkNow).
  const middleware: RequestHandler = (req, res, next) => {
    const verdict = limit.checkNow(req, {
      ip: req.ip,
      forwardedFor: req.headers['x-forwarded-for'],
      // Express keeps the setting as given (true, a hop count, addresses or a function), not a boolean.
      proxyTrusted: Boolean(req.app.get('trust proxy')),
      socketAddress: req.socket.remoteAddress,
      response: res,
      method: req.method,
      // req.url loses the path a router is mounted at.
      url: req.originalUrl,
    })
    if (verdict instanceof Promise) {
      // Express 4 ignores a rejected promise, so the error is handed over rather than thrown.
      verdict.then((settled) => applied(settled, res, next), next)
      return
    }
    applied(verdict, res, next)
  }
  return Object.assign(middleware, { engine: limit, limit, close: () => limit.close() })
}

/** Sets the headers, then answers the request or hands it on. */
function applied(verdict: RateLimitVerdict, res: Response, next: NextFunction): void {
  try {
    res.set(verdict.headers)
    if (verdict.action === 'respond') {
      res.status(verdict.status).type(verdict.contentType).send(verdict.body)
      return
    }
    res.locals.rateLimit = verdict.decision
  } catch (error) {
    next(error)
    return
  }
  // Outside the try, so an error from a later handler can never reach next() a second time.
  next()
}
