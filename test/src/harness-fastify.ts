import { once } from 'node:events'
import type { RateLimitVerdict } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type preHandlerAsyncHookHandler,
  type RouteHandler,
} from 'fastify'
import supertest from 'supertest'
import {
  type ErrorBody,
  type HandlerBody,
  type Harness,
  type HarnessOptions,
  type HarnessRoute,
  handlerError,
  type MakeHarness,
  statusAsked,
} from './adapter-harness.js'

const handler: RouteHandler = async (request, reply) =>
  reply.code(statusAsked(request.headers)).send({ reason: request.rateLimit?.reason ?? null } satisfies HandlerBody)
const failing: RouteHandler = async () => {
  throw handlerError()
}
const hanging: RouteHandler = async (_request, reply) => {
  await once(reply.raw, 'close')
  return reply
}

const handlerOf = (route: HarnessRoute) => (route.throws ? failing : route.hangs ? hanging : handler)

type Check = (request: FastifyRequest, reply: FastifyReply) => Promise<RateLimitVerdict>

/** A route's limit applied a second time, by hand, its verdict applied as the plugin's hook applies one. */
function secondApplication(route: HarnessRoute, check: Check): { preHandler?: preHandlerAsyncHookHandler } {
  if (!route.rateLimit || !route.mountedTwice) return {}
  return {
    preHandler: async (request, reply) => {
      const verdict = await check(request, reply)
      reply.headers(verdict.headers)
      if (verdict.action === 'respond') return reply.code(verdict.status).type(verdict.contentType).send(verdict.body)
    },
  }
}

function appFor({ trustProxy, errorHandler }: HarnessOptions): FastifyInstance {
  const app = Fastify({ trustProxy: trustProxy === 'not-the-peer' ? '10.0.0.1' : trustProxy })
  if (errorHandler) {
    app.setErrorHandler(async (error: { statusCode?: number; message: string }, _request, reply) =>
      reply.code(error.statusCode ?? 500).send({ error: error.message } satisfies ErrorBody),
    )
  }
  return app
}

async function listen(app: FastifyInstance): Promise<Harness> {
  // Fastify's own logger is off by default, so the errors the suite provokes stay quiet.
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { request: supertest(url), close: () => app.close() }
}

/**
 * The plugin registered once with `global: false`, each limited route giving its options in
 * `config.rateLimit`: the Fastify way to limit routes differently. The plugin's own options are a
 * placeholder no route uses; route options that bring their own `windows` replace it.
 */
export const makeFastifyHarness: MakeHarness = async (options) => {
  const app = appFor(options)
  await app.register(tollgate, { global: false, rule: 'unused', windows: [{ limit: 1, period: '1s' }] })
  for (const route of options.routes) {
    app.route({
      method: route.method,
      url: route.path,
      ...(route.rateLimit ? { config: { rateLimit: route.rateLimit } } : {}),
      ...secondApplication(route, (request, reply) => app.tollgate.check(request, route.rateLimit, reply)),
      handler: handlerOf(route),
    })
  }
  return listen(app)
}

/**
 * The plugin registered with each limited route's options as its own, in a scope holding only
 * that route: the plugin-wide path (`global` left at its default) that most apps use.
 */
export const makeFastifyScopedHarness: MakeHarness = async (options) => {
  const app = appFor(options)
  for (const route of options.routes) {
    await app.register(async (scope) => {
      if (route.rateLimit) await scope.register(tollgate, route.rateLimit)
      scope.route({
        method: route.method,
        url: route.path,
        ...secondApplication(route, (request, reply) => scope.tollgate.check(request, undefined, reply)),
        handler: handlerOf(route),
      })
    })
  }
  return listen(app)
}
