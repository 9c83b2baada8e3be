import Router from '@koa/router'
import { rateLimit } from '@tollgate/koa'
import Koa, { type Middleware } from 'koa'
import { type HandlerBody, type MakeHarness, serveOnLoopback } from './adapter-harness.js'

/**
 * A Koa app with `rateLimit()` on each limited route of a `@koa/router`. It answers refusals itself
 * (`throw: false`), so that its bodies compare with the other frameworks'; the default, throwing
 * mode is covered where the Koa suite runs.
 */
export const makeKoaHarness: MakeHarness = async ({ routes, trustProxy }) => {
  const app = new Koa()
  app.proxy = trustProxy
  // The suite provokes errors on purpose; Koa would print each one.
  app.silent = true
  const router = new Router()
  const handler: Middleware = (ctx) => {
    ctx.body = { reason: ctx.state.rateLimit?.reason ?? null } satisfies HandlerBody
  }
  for (const route of routes) {
    const middleware = route.rateLimit ? [rateLimit({ ...route.rateLimit, throw: false })] : []
    if (route.method === 'GET') router.get(route.path, ...middleware, handler)
    else router.post(route.path, ...middleware, handler)
  }
  app.use(router.routes())
  return serveOnLoopback(app.callback())
}
