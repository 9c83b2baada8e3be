import { rateLimit } from '@tollgate/express'
import express, { type ErrorRequestHandler, type RequestHandler } from 'express'
import {
  type ErrorBody,
  type HandlerBody,
  handlerError,
  type MakeHarness,
  serveOnLoopback,
  statusAsked,
} from './adapter-harness.js'

/** An Express app with `rateLimit()` as middleware on each limited route. */
export const makeExpressHarness: MakeHarness = async ({ routes, trustProxy, errorHandler }) => {
  const app = express()
  app.set('trust proxy', trustProxy === 'not-the-peer' ? '10.0.0.1' : trustProxy)
  const handler: RequestHandler = (req, res) => {
    res.status(statusAsked(req.headers)).json({ reason: res.locals.rateLimit?.reason ?? null } satisfies HandlerBody)
  }
  const failing: RequestHandler = () => {
    throw handlerError()
  }
  // Express needs nothing to wait for the client to leave: a response never ended stays open.
  const hanging: RequestHandler = () => {}
  for (const route of routes) {
    if (route.rateLimit && route.mountedTwice) app.use(route.path, rateLimit(route.rateLimit))
    const middleware = route.rateLimit ? [rateLimit(route.rateLimit)] : []
    const handle = route.throws ? failing : route.hangs ? hanging : handler
    if (route.method === 'GET') app.get(route.path, ...middleware, handle)
    else app.post(route.path, ...middleware, handle)
  }
  if (errorHandler) {
    const answer: ErrorRequestHandler = (error: { status?: number; message: string }, _req, res, _next) => {
      res.status(error.status ?? 500).json({ error: error.message } satisfies ErrorBody)
    }
    app.use(answer)
  }
  return serveOnLoopback(app)
}
