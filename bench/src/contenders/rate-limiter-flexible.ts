import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import { type Contender, requireClient, type SetupOptions } from './contender.js'

type Consumer = RateLimiterMemory | RateLimiterRedis

/** `consume` resolves when admitted and rejects with a RateLimiterRes when refused, or with an Error when the store fails. */
async function admitted(limiter: Consumer, key: string): Promise<boolean> {
  try {
    await limiter.consume(key)
    return true
  } catch (refusal) {
    if (refusal instanceof RateLimiterRes) return false
    throw refusal
  }
}

function durationOf(options: SetupOptions): number {
  // rate-limiter-flexible counts in whole seconds.
  return Math.max(1, Math.round(options.periodMs / 1000))
}

export const rateLimiterFlexibleContenders: readonly Contender[] = [
  {
    id: 'rate-limiter-flexible/redis',
    library: 'rate-limiter-flexible',
    variant: 'RateLimiterRedis',
    store: 'redis',
    role: 'incumbent',
    shapes: ['one-window'],
    call: 'RateLimiterRedis.consume(key): one EVALSHA of SET NX + INCRBY + PTTL',
    async setup(options) {
      const limiter = new RateLimiterRedis({
        storeClient: requireClient(options, this.id),
        points: options.limit,
        duration: durationOf(options),
      })
      return { decide: ([key]) => admitted(limiter, key as string), teardown: async () => {} }
    },
  },
  {
    id: 'rate-limiter-flexible/memory',
    library: 'rate-limiter-flexible',
    variant: 'RateLimiterMemory',
    store: 'memory',
    role: 'incumbent',
    shapes: ['one-window'],
    call: 'RateLimiterMemory.consume(key)',
    async setup(options) {
      const limiter = new RateLimiterMemory({ points: options.limit, duration: durationOf(options) })
      return { decide: ([key]) => admitted(limiter, key as string), teardown: async () => {} }
    },
  },
]
