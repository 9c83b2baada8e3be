import type { RateLimit, RateLimitVerdict } from '@tollgate/core'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { requestView } from './request-view.js'

export type RateLimitHook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/**
 * The hook that applies one engine; a request it has already seen is not charged again. It marks
 * the request with a symbol of its own rather than keeping it in a WeakSet, whose entry cost every
 * request more, its collection included (bench/README.md has the figure). A hook with `done`
 * rather than an async one: a verdict reached in the process is applied and the request goes on
 * in the same turn, with no promise (`checkNow`).
 */
export function rateLimitHook(engine: RateLimit<FastifyRequest>): RateLimitHook {
  const charged = Symbol('tollgate: charged by this limit')
  return (request, reply, done) => {
    const marked = request as FastifyRequest & { [charged]?: true }
    if (marked[charged] === true) {
      done()
      return
    }
    marked[charged] = true
    const verdict = engine.checkNow(request, requestView(request, reply))
    // Fastify catches what the hook throws; done() stays outside any try of ours, so that what
    // a later hook throws never reaches done() a second time.
    if (!(verdict instanceof Promise)) {
      if (applied(request, reply, verdict)) done()
      return
    }
    verdict.then(
      (settled) => {
        let goesOn: boolean
        try {
          goesOn = applied(request, reply, settled)
        } catch (error) {
          done(error as Error)
          return
        }
        if (goesOn) done()
      },
      (error: unknown) => done(error as Error),
    )
  }
}

/**
 * Sets the headers, then either marks the request to go on (true) or answers it (false): a hook
 * that has sent the reply does not call `done`.
 */
function applied(request: FastifyRequest, reply: FastifyReply, verdict: RateLimitVerdict): boolean {
  reply.headers(verdict.headers)
  if (verdict.action === 'continue') {
    request.rateLimit = verdict.decision
    return true
  }
  reply.code(verdict.status).type(verdict.contentType).send(verdict.body)
  return false
}
