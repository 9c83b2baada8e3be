import type { RateLimit } from '@tollgate/core'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { requestView } from './request-view.js'

export type RateLimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>

/** The hook that applies one engine; a request it has already seen is not charged again. */
export function rateLimitHook(engine: RateLimit<FastifyRequest>): RateLimitHook {
  const charged = new WeakSet<FastifyRequest>()
  return async (request, reply) => {
    if (charged.has(request)) return undefined
    charged.add(request)
    const verdict = await engine.check(request, requestView(request, reply))
    reply.headers(verdict.headers)
    if (verdict.action === 'continue') {
      request.rateLimit = verdict.decision
      return undefined
    }
    // Returning the reply after `send` is how an async hook tells Fastify to stop the chain.
    return reply.code(verdict.status).type(verdict.contentType).send(verdict.body)
  }
}
