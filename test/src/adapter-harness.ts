import { createServer, type IncomingHttpHeaders, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { RateLimitOptions } from '@tollgate/core'
import supertest, { type Agent } from 'supertest'

/**
 * The part of a request the conformance suite's callbacks read. Express `req`, Fastify `request`
 * and Koa `ctx` all carry Node's parsed `headers`, so options written against this type are valid
 * options for every adapter. Hono's `Context` does not: its harness hands the callbacks a view of
 * this shape made from the request's Web `Headers`.
 */
export interface HarnessRequest {
  readonly headers: IncomingHttpHeaders
}

export interface HarnessRoute {
  method: 'GET' | 'POST'
  path: string
  /** The route's own rate limit; a route without one is not limited at all. */
  rateLimit?: RateLimitOptions<HarnessRequest>
  /** Its handler throws `handlerError()` instead of answering, once the limit has let the request through. */
  throws?: boolean
  /** Its handler never answers: the request ends when the client goes away. */
  hangs?: boolean
  /**
   * Its `rateLimit` is applied a second time to each request, as an app may by mistake: Express,
   * Koa and Hono on the app before the route's own, Fastify by `fastify.tollgate.check` in a
   * `preHandler` besides the plugin's hook, NestJS by `@UseGuards(TollgateGuard)` on the route
   * besides the global guard.
   */
  mountedTwice?: boolean
}

/** What a handler told to throw throws: a 502 as each framework reads a status from an error. */
export function handlerError(): Error & { status: number; statusCode: number; expose: boolean } {
  return Object.assign(new Error('upstream down'), { status: 502, statusCode: 502, expose: true })
}

export interface HarnessOptions {
  routes: readonly HarnessRoute[]
  /**
   * Whether the framework trusts `X-Forwarded-For`: Express `trust proxy`, Fastify `trustProxy`,
   * Koa `app.proxy`, the Hono adapter's own `trustProxy`, NestJS its platform's setting.
   * `'not-the-peer'`: a proxy is trusted, but the requests' `X-Forwarded-For` does not decide the
   * address (Express, Fastify, Hono and NestJS trust 10.0.0.1 only, not the test's 127.0.0.1; Koa
   * reads X-Real-IP instead).
   */
  trustProxy: boolean | 'not-the-peer'
  /**
   * The app's own error handling, as apps usually have: every error answered as JSON
   * `{ error: message }` with the error's status (Express error middleware, Fastify
   * `setErrorHandler`, a Koa middleware around the rest, Hono `app.onError`, a NestJS global
   * exception filter). Otherwise the framework's default.
   */
  errorHandler?: boolean
}

/** What `errorHandler` answers with. */
export interface ErrorBody {
  error: string
}

/**
 * What every route's handler answers: the reason of the decision the adapter exposed to it
 * (Express `res.locals.rateLimit`, Fastify `request.rateLimit`, Koa `ctx.state.rateLimit`, Hono
 * `c.get('rateLimit')`, NestJS `@RateLimitDecision()`), or null when there is none; with the
 * status the request asks for in `X-Status`, else 200.
 */
export interface HandlerBody {
  reason: string | null
}

export interface Harness {
  /** Requests to the app, which listens on 127.0.0.1. */
  request: Agent
  close(): Promise<void>
}

/** The status a handler answers with: the request's `X-Status`, else 200. */
export function statusAsked(headers: IncomingHttpHeaders): number {
  const asked = headers['x-status']
  return typeof asked === 'string' ? Number(asked) : 200
}

/** Builds a real app of one framework with the adapter applied to each limited route. */
export type MakeHarness = (options: HarnessOptions) => Promise<Harness>

/** Serves a request listener (an Express app, a Koa `app.callback()`) on a free port of 127.0.0.1. */
export async function serveOnLoopback(listener: RequestListener): Promise<Harness> {
  const server = createServer(listener)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const { port } = server.address() as AddressInfo
  return {
    request: supertest(`http://127.0.0.1:${port}`),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      }),
  }
}
