import MemoryLimiter from 'koa-ratelimit/limiter/memory.js'
import RedisLimiter from 'koa-ratelimit/limiter/redis.js'
import { type Contender, requireClient } from './contender.js'

interface KoaLimiter {
  get(): Promise<{ remaining: number }>
}

/**
 * koa-ratelimit's middleware builds a limiter per request and calls `get()`, admitting while
 * `remaining > 0`; the same is done here. Its Redis limiter (async-ratelimiter) is a sliding log
 * in a sorted set; its memory limiter a counter per key in a Map.
 */
export const koaRatelimitContenders: readonly Contender[] = [
  {
    id: 'koa-ratelimit/redis',
    library: 'koa-ratelimit',
    variant: 'redis driver',
    store: 'redis',
    role: 'incumbent',
    shapes: ['one-window'],
    call: 'new RedisLimiter({ id, db, max, duration }).get(): one EVALSHA of a sorted-set sliding log',
    async setup(options) {
      const db = requireClient(options, this.id)
      return {
        async decide([id]) {
          const limiter = new RedisLimiter({
            id: id as string,
            db,
            max: options.limit,
            duration: options.periodMs,
          }) as KoaLimiter
          return (await limiter.get()).remaining > 0
        },
        teardown: async () => {},
      }
    },
  },
  {
    id: 'koa-ratelimit/memory',
    library: 'koa-ratelimit',
    variant: 'memory driver',
    store: 'memory',
    role: 'incumbent',
    shapes: ['one-window'],
    call: 'new MemoryLimiter({ id, db, max, duration }).get() on one Map',
    async setup(options) {
      const db = new Map()
      return {
        async decide([id]) {
          const limiter = new MemoryLimiter({
            id: id as string,
            db,
            max: options.limit,
            duration: options.periodMs,
          }) as KoaLimiter
          return (await limiter.get()).remaining > 0
        },
        teardown: async () => {},
      }
    },
  },
]
