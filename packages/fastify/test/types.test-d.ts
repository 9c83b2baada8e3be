import type { Decision, RateLimitVerdict } from '@tollgate/core'
import type { FastifyInstance } from 'fastify'
import type { RouteRateLimitOptions } from '../src/index.js'

/** Type-checked by tsc, never run: what the plugin adds to Fastify's types. */
export function routes(app: FastifyInstance): void {
  const handler = async () => ({ ok: true })
  app.get('/named', { config: { rateLimit: { rule: 'a' } } }, handler)
  app.get('/own', { config: { rateLimit: { windows: [{ limit: 5, period: '1m' }], hook: 'preHandler' } } }, handler)
  app.get('/none', { config: { rateLimit: false } }, handler)
  // @ts-expect-error a rule is a name
  app.get('/bad-rule', { config: { rateLimit: { rule: 1 } } }, handler)
  // @ts-expect-error only onRequest and preHandler check
  app.get('/bad-hook', { config: { rateLimit: { hook: 'onSend' } } }, handler)

  app.get('/decision', async (request) => {
    const decision: Decision | undefined = request.rateLimit
    const route: RouteRateLimitOptions = { rule: 'a' }
    const verdict: RateLimitVerdict = await app.tollgate.check(request, route)
    return { decision, verdict, rule: app.tollgate.engine?.rule }
  })
}
