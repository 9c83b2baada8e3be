import { once } from 'node:events'
import { getRequestListener } from '@hono/node-server'
import type { RateLimitOptions } from '@tollgate/core'
import { type HonoRateLimitOptions, rateLimit } from '@tollgate/hono'
import { type Context, type Handler, Hono } from 'hono'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import {
  type ErrorBody,
  type HandlerBody,
  type HarnessOptions,
  type HarnessRequest,
  handlerError,
  type MakeHarness,
  serveOnLoopback,
  statusAsked,
} from './adapter-harness.js'

/**
 * A Hono app on `@hono/node-server` with `rateLimit()` in front of each limited route, its
 * address taken from the default (the Node socket) and its proxy trust from `trustProxy`.
 */
export const makeHonoHarness: MakeHarness = async ({ routes, trustProxy, errorHandler }) => {
  const app = new Hono()
  if (errorHandler) {
    app.onError((error, c) =>
      c.json({ error: error.message } satisfies ErrorBody, error instanceof HTTPException ? error.status : 500),
    )
  }
  const handler: Handler = (c) =>
    c.json(
      { reason: c.get('rateLimit')?.reason ?? null } satisfies HandlerBody,
      statusAsked({ 'x-status': c.req.header('x-status') }) as ContentfulStatusCode,
    )
  // A status travels on an error in Hono as an HTTPException, which its default handler answers.
  const failing: Handler = () => {
    const error = handlerError()
    throw new HTTPException(502, { message: error.message, cause: error })
  }
  const hanging: Handler = async (c) => {
    await once(c.req.raw.signal, 'abort')
    return new Response(null, { status: 499 })
  }
  for (const route of routes) {
    const options = route.rateLimit && { ...onContext(route.rateLimit), trustProxy: trustOf(trustProxy) }
    if (options && route.mountedTwice) app.use(route.path, rateLimit(options))
    const handle = route.throws ? failing : route.hangs ? hanging : handler
    if (options) app.on(route.method, route.path, rateLimit(options), handle)
    else app.on(route.method, route.path, handle)
  }
  return serveOnLoopback(getRequestListener(app.fetch))
}

/** Hono has no proxy setting of its own: the adapter's `trustProxy` is it. */
function trustOf(trustProxy: HarnessOptions['trustProxy']): HonoRateLimitOptions['trustProxy'] {
  return trustProxy === 'not-the-peer' ? (address) => address === '10.0.0.1' : trustProxy
}

/**
 * The suite's options, whose functions read Node's `headers` from the request, for Hono, which
 * hands them its Context: each function gets the request's headers as Node would parse them.
 */
function onContext(options: RateLimitOptions<HarnessRequest>): HonoRateLimitOptions {
  const { rule, identify, cost, skip, countOnly, settle, onLimited, problem, refusal, ...rest } = options
  const converted: HonoRateLimitOptions = rest
  if (rule !== undefined) converted.rule = typeof rule === 'string' ? rule : (c) => rule(requestOf(c))
  if (identify) converted.identify = (c, client) => identify(requestOf(c), client)
  if (cost !== undefined) converted.cost = typeof cost === 'number' ? cost : (c) => cost(requestOf(c))
  if (skip) converted.skip = (c) => skip(requestOf(c))
  if (countOnly !== undefined) {
    converted.countOnly =
      typeof countOnly === 'string'
        ? countOnly
        : ({ request, status }) => countOnly({ request: requestOf(request), status })
  }
  if (settle) converted.settle = (c, response) => settle(requestOf(c), response)
  if (onLimited) converted.onLimited = (c, decision) => onLimited(requestOf(c), decision)
  if (problem) converted.problem = (decision, c) => problem(decision, requestOf(c))
  if (refusal) converted.refusal = (decision, c, standard) => refusal(decision, requestOf(c), standard)
  return converted
}

function requestOf(c: Context): HarnessRequest {
  return { headers: Object.fromEntries(c.req.raw.headers) }
}
