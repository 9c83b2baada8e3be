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
type LimiterClass = new (options: { id: string; db: unknown; max: number; duration: number }) => KoaLimiter

/** The per-request `get()` the middleware makes, over whichever driver and backing store. */
function decideWith(Limiter: LimiterClass, db: unknown, limit: number, periodMs: number) {
  return async ([id]: readonly string[]) =>
    (await new Limiter({ id: id as string, db, max: limit, duration: periodMs }).get()).remaining > 0
}

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
        decide: decideWith(RedisLimiter as unknown as LimiterClass, db, options.limit, options.periodMs),
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
      return {
        decide: decideWith(MemoryLimiter as unknown as LimiterClass, new Map(), options.limit, options.periodMs),
        teardown: async () => {},
      }
    },
  },
]
