import { MemoryStore } from 'express-rate-limit'
import { type RedisReply, RedisStore } from 'rate-limit-redis'
import { type Contender, requireClient } from './contender.js'

/**
 * express-rate-limit has no library API of its own: its middleware calls the store's
 * `increment(key)` once per request and admits while `totalHits <= limit`. That call is what is
 * measured here; the middleware itself is measured in the HTTP measure.
 */
export const expressRateLimitContenders: readonly Contender[] = [
  {
    id: 'express-rate-limit/redis',
    library: 'express-rate-limit',
    variant: 'rate-limit-redis',
    store: 'redis',
    role: 'incumbent',
    shapes: ['one-window'],
    call: "rate-limit-redis RedisStore.increment(key): one EVALSHA of PTTL + INCR (or SET PX), the middleware's only store call",
    async setup(options) {
      const client = requireClient(options, this.id)
      const store = new RedisStore({
        sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as Promise<RedisReply>,
      })
      await store.init({ windowMs: options.periodMs } as Parameters<RedisStore['init']>[0])
      return {
        async decide([key]) {
          const { totalHits } = await store.increment(key as string)
          return totalHits <= options.limit
        },
        teardown: async () => {},
      }
    },
  },
  {
    id: 'express-rate-limit/memory',
    library: 'express-rate-limit',
    variant: 'MemoryStore',
    store: 'memory',
    role: 'incumbent',
    shapes: ['one-window'],
    call: "express-rate-limit MemoryStore.increment(key), the middleware's only store call",
    async setup(options) {
      const store = new MemoryStore()
      store.init({ windowMs: options.periodMs } as Parameters<MemoryStore['init']>[0])
      return {
        async decide([key]) {
          const { totalHits } = await store.increment(key as string)
          return totalHits <= options.limit
        },
        teardown: async () => store.shutdown(),
      }
    },
  },
]
