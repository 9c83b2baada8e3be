import { HybridStore, RedisStore, type Store } from '@tollgate/core'
import type { Redis } from 'ioredis'

/**
 * Where the limiter counts: in this process without Redis; with Redis, on Redis per request, or,
 * with TOLLGATE_STORE=hybrid, in this process with counters synced to Redis about once a second,
 * or with TOLLGATE_STORE=hybrid-strict, in this process on slices of the limits reserved in Redis.
 */
export function storeFrom(redis: Redis | undefined, kind = process.env.TOLLGATE_STORE): Store | undefined {
  const hybrid = kind === 'hybrid' || kind === 'hybrid-strict'
  if (redis === undefined) {
    if (hybrid) throw new Error(`TOLLGATE_STORE=${kind} needs REDIS_URL: the hybrid store syncs with Redis`)
    return undefined
  }
  if (!hybrid) return new RedisStore({ client: redis })
  return new HybridStore({ client: redis, consistency: kind === 'hybrid-strict' ? 'strict' : 'approximate' })
}
