import { rateLimit } from '@tollgate/express'
import express, { type RequestHandler } from 'express'
import { type HandlerBody, type MakeHarness, serveOnLoopback } from './adapter-harness.js'

/** An Express app with `rateLimit()` as middleware on each limited route. */
export const makeExpressHarness: MakeHarness = async ({ routes, trustProxy }) => {
  const app = express()
  app.set('trust proxy', trustProxy)
  const handler: RequestHandler = (_req, res) => {
    res.json({ reason: res.locals.rateLimit?.reason ?? null } satisfies HandlerBody)
  }
  for (const route of routes) {
    const middleware = route.rateLimit ? [rateLimit(route.rateLimit)] : []
    if (route.method === 'GET') app.get(route.path, ...middleware, handler)
    else app.post(route.path, ...middleware, handler)
  }
  return serveOnLoopback(app)
}
