import { rateLimit as tollgate } from '@tollgate/express'
import express, { type RequestHandler } from 'express'
import { rateLimit } from 'express-rate-limit'
import type { Redis } from 'ioredis'
import { RedisStore as RateLimitRedis, type RedisReply } from 'rate-limit-redis'
import {
  ceilingCheck,
  HTTP_LIMIT,
  HTTP_PERIOD_MS,
  TOLLGATE_HEADERS,
  tollgateOptions,
  type Variant,
} from './variants.js'

async function limiterOf(variant: Variant, client: Redis | undefined): Promise<RequestHandler | undefined> {
  switch (variant) {
    case 'none':
      return undefined
    case 'headers-only':
      // As @tollgate/express sets them.
      return (_req, res, next) => {
        res.set(TOLLGATE_HEADERS)
        next()
      }
    case 'incumbent-memory':
      return rateLimit({ windowMs: HTTP_PERIOD_MS, limit: HTTP_LIMIT })
    case 'incumbent-redis':
      return rateLimit({
        windowMs: HTTP_PERIOD_MS,
        limit: HTTP_LIMIT,
        store: new RateLimitRedis({
          sendCommand: (command: string, ...args: string[]) => client!.call(command, ...args) as Promise<RedisReply>,
        }),
      })
    case 'tollgate-memory':
    case 'tollgate-hybrid':
    case 'tollgate-redis':
    case 'tollgate-redis-sliding-log':
      return tollgate(tollgateOptions(variant, client))
    case 'ceiling': {
      const check = await ceilingCheck(client!)
      return (req, res, next) => {
        check(req.ip ?? '').then((admitted) => (admitted ? next() : res.status(429).end()), next)
      }
    }
  }
}

export async function startExpress(variant: Variant, client: Redis | undefined): Promise<number> {
  const app = express()
  const limiter = await limiterOf(variant, client)
  if (limiter) app.use(limiter)
  app.get('/', (_req, res) => {
    res.send('ok')
  })
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port))
  })
}
