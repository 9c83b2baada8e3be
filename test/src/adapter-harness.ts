import { createServer, type IncomingHttpHeaders, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { RateLimitOptions } from '@tollgate/core'
import supertest, { type Agent } from 'supertest'

/**
 * The part of a request the conformance suite's callbacks read. Express `req`, Fastify `request`
 * and Koa `ctx` all carry Node's parsed `headers`, so options written against this type are valid
 * options for every adapter.
 */
export interface HarnessRequest {
  readonly headers: IncomingHttpHeaders
}

export interface HarnessRoute {
  method: 'GET' | 'POST'
  path: string
  /** The route's own rate limit; a route without one is not limited at all. */
  rateLimit?: RateLimitOptions<HarnessRequest>
}

export interface HarnessOptions {
  routes: readonly HarnessRoute[]
  /** Whether the framework trusts `X-Forwarded-For`: Express `trust proxy`, Fastify `trustProxy`, Koa `app.proxy`. */
  trustProxy: boolean
}

/**
 * What every route's handler answers with 200: the reason of the decision the adapter exposed to
 * it (Express `res.locals.rateLimit`, Fastify `request.rateLimit`, Koa `ctx.state.rateLimit`), or
 * null when there is none.
 */
export interface HandlerBody {
  reason: string | null
}

export interface Harness {
  /** Requests to the app, which listens on 127.0.0.1. */
  request: Agent
  close(): Promise<void>
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
