import LocalStore from '@fastify/rate-limit/store/LocalStore.js'
import RedisStore from '@fastify/rate-limit/store/RedisStore.js'
import { type Contender, requireClient } from './contender.js'

interface IncrStore {
  incr(
    key: string,
    callback: (error: Error | null, result: { current: number; ttl: number }) => void,
    timeWindow: number,
    max: number,
  ): void
}

/** What @fastify/rate-limit's onRequest hook calls once per request: `store.incr(key, cb, timeWindow, max)`, admitting while `current <= max`. */
function deciderOf(store: IncrStore, limit: number, periodMs: number) {
  return {
    decide([key]: readonly string[]) {
      return new Promise<boolean>((resolve, reject) => {
        store.incr(
          key as string,
          (error, result) => (error ? reject(error) : resolve(result.current <= limit)),
          periodMs,
          limit,
        )
      })
    },
    teardown: async () => {},
  }
}

export const fastifyRateLimitContenders: readonly Contender[] = [
  {
    id: '@fastify/rate-limit/redis',
    library: '@fastify/rate-limit',
    variant: 'RedisStore',
    store: 'redis',
    role: 'incumbent',
    shapes: ['one-window'],
    call: "the plugin's internal RedisStore.incr(key): one EVALSHA of INCR + PEXPIRE or PTTL",
    async setup(options) {
      const store = new RedisStore(false, false, requireClient(options, this.id)) as IncrStore
      return deciderOf(store, options.limit, options.periodMs)
    },
  },
  {
    id: '@fastify/rate-limit/memory',
    library: '@fastify/rate-limit',
    variant: 'LocalStore',
    store: 'memory',
    role: 'incumbent',
    shapes: ['one-window'],
    // Its LRU defaults to 5,000 entries; 10,000 identifiers would evict on every call.
    call: "the plugin's internal LocalStore.incr(key), LRU sized to 20,000 (default 5,000)",
    async setup(options) {
      const store = new LocalStore(false, false, 20_000) as IncrStore
      return deciderOf(store, options.limit, options.periodMs)
    },
  },
]
