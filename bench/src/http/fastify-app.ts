import { createRequire } from 'node:module'
import { tollgate } from '@tollgate/fastify'
import Fastify, { type FastifyPluginAsync } from 'fastify'
import type { Redis } from 'ioredis'
import {
  ceilingCheck,
  HTTP_LIMIT,
  HTTP_PERIOD_MS,
  TOLLGATE_HEADERS,
  tollgateOptions,
  type Variant,
} from './variants.js'

// Loaded without its types: they and @tollgate/fastify's both declare FastifyContextConfig's
// `rateLimit`, differently, so one program cannot typecheck with both (no app has both).
const fastifyRateLimit = createRequire(import.meta.url)('@fastify/rate-limit') as FastifyPluginAsync<{
  max: number
  timeWindow: number
  redis?: Redis
}>

export async function startFastify(variant: Variant, client: Redis | undefined): Promise<number> {
  const app = Fastify()
  switch (variant) {
    case 'none':
      break
    case 'headers-only':
      // As @tollgate/fastify sets them: an onRequest hook with done.
      app.addHook('onRequest', (_request, reply, done) => {
        reply.headers(TOLLGATE_HEADERS)
        done()
      })
      break
    case 'incumbent-memory':
      await app.register(fastifyRateLimit, { max: HTTP_LIMIT, timeWindow: HTTP_PERIOD_MS })
      break
    case 'incumbent-redis':
      await app.register(fastifyRateLimit, { max: HTTP_LIMIT, timeWindow: HTTP_PERIOD_MS, redis: client })
      break
    case 'tollgate-memory':
    case 'tollgate-hybrid':
    case 'tollgate-redis':
    case 'tollgate-redis-sliding-log':
      await app.register(tollgate, tollgateOptions(variant, client))
      break
    case 'ceiling': {
      const check = await ceilingCheck(client!)
      app.addHook('onRequest', async (request, reply) => {
        if (!(await check(request.ip))) return reply.code(429).send()
      })
      break
    }
  }
  app.get('/', async () => 'ok')
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  return Number(new URL(address).port)
}
