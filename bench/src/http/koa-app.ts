import { rateLimit as tollgate } from '@tollgate/koa'
import type { Redis } from 'ioredis'
import Koa, { type Middleware } from 'koa'
import ratelimit from 'koa-ratelimit'
import {
  ceilingCheck,
  HTTP_LIMIT,
  HTTP_PERIOD_MS,
  TOLLGATE_HEADERS,
  tollgateOptions,
  type Variant,
} from './variants.js'

async function limiterOf(variant: Variant, client: Redis | undefined): Promise<Middleware | undefined> {
  switch (variant) {
    case 'none':
      return undefined
    case 'headers-only':
      // As @tollgate/koa sets them, answered in the same turn.
      return (ctx, next) => {
        ctx.set(TOLLGATE_HEADERS)
        return next()
      }
    case 'incumbent-memory':
      return ratelimit({ driver: 'memory', db: new Map(), duration: HTTP_PERIOD_MS, max: HTTP_LIMIT })
    case 'incumbent-redis':
      // @types/koa-ratelimit types `db` with ioredis 4's types; the ioredis 5 client is what it runs with.
      return ratelimit({
        driver: 'redis',
        db: client as unknown as ratelimit.MiddlewareOptions['db'],
        duration: HTTP_PERIOD_MS,
        max: HTTP_LIMIT,
      })
    case 'tollgate-memory':
    case 'tollgate-hybrid':
    case 'tollgate-redis':
    case 'tollgate-redis-sliding-log':
      return tollgate(tollgateOptions(variant, client))
    case 'ceiling': {
      const check = await ceilingCheck(client!)
      return async (ctx, next) => {
        if (await check(ctx.ip)) return next()
        ctx.status = 429
      }
    }
  }
}

export async function startKoa(variant: Variant, client: Redis | undefined): Promise<number> {
  const app = new Koa()
  const limiter = await limiterOf(variant, client)
  if (limiter) app.use(limiter)
  app.use((ctx) => {
    ctx.body = 'ok'
  })
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port))
  })
}
