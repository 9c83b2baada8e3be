import { once } from 'node:events'
import Router from '@koa/router'
import { rateLimit } from '@tollgate/koa'
import Koa, { type Middleware } from 'koa'
import {
  type ErrorBody,
  type HandlerBody,
  handlerError,
  type MakeHarness,
  serveOnLoopback,
  statusAsked,
} from './adapter-harness.js'

/** A Koa app with `rateLimit()`, as its defaults have it, on each limited route of a `@koa/router`. */
export const makeKoaHarness: MakeHarness = async ({ routes, trustProxy, errorHandler }) => {
  const app = new Koa()
  app.proxy = trustProxy !== false
  // Koa trusts no proxy by address: what comes close is a proxy that names the client in another header.
  if (trustProxy === 'not-the-peer') app.proxyIpHeader = 'X-Real-IP'
  // The suite provokes errors on purpose; Koa would print each one.
  app.silent = true
  if (errorHandler) {
    // The usual Koa set-up: one middleware around all the others turns every error into JSON.
    app.use(async (ctx, next) => {
      try {
        await next()
      } catch (error) {
        ctx.status = (error as { status?: number }).status ?? 500
        ctx.body = { error: (error as Error).message } satisfies ErrorBody
      }
    })
  }
  const router = new Router()
  const handler: Middleware = (ctx) => {
    ctx.status = statusAsked(ctx.headers)
    ctx.body = { reason: ctx.state.rateLimit?.reason ?? null } satisfies HandlerBody
  }
  const failing: Middleware = () => {
    throw handlerError()
  }
  const hanging: Middleware = async (ctx) => {
    await once(ctx.res, 'close')
  }
  for (const route of routes) {
    if (route.rateLimit && route.mountedTwice) {
      const onTheApp = rateLimit(route.rateLimit)
      app.use((ctx, next) => (ctx.path === route.path ? onTheApp(ctx, next) : next()))
    }
    const middleware = route.rateLimit ? [rateLimit(route.rateLimit)] : []
    const handle = route.throws ? failing : route.hangs ? hanging : handler
    if (route.method === 'GET') router.get(route.path, ...middleware, handle)
    else router.post(route.path, ...middleware, handle)
  }
  app.use(router.routes())
  return serveOnLoopback(app.callback())
}
