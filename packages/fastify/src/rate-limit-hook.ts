import type { RateLimit } from '@tollgate/core'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { requestView } from './request-view.js'

export type RateLimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>

/**
 * The hook that applies one engine; a request it has already seen is not charged again. It marks
 * the request with a symbol of its own rather than keeping it in a WeakSet, whose entry cost every
 * request about 130 ns more, its collection included (bench/README.md).
 */
export function rateLimitHook(engine: RateLimit<FastifyRequest>): RateLimitHook {
  const charged = Symbol('tollgate: charged by this limit')
  return async (request, reply) => {
    const marked = request as FastifyRequest & { [charged]?: true }
    if (marked[charged] === true) return undefined
    marked[charged] = true
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
