import { HybridStore, RedisStore, type Store } from '@tollgate/core'
import type { Redis } from 'ioredis'

/**
 * Where the limiter counts: in this process without Redis; with Redis, on Redis per request, or,
 * with TOLLGATE_STORE=hybrid, in this process with counters synced to Redis about once a second.
 */
export function storeFrom(redis: Redis | undefined, kind = process.env.TOLLGATE_STORE): Store | undefined {
  if (redis === undefined) {
    if (kind === 'hybrid') throw new Error('TOLLGATE_STORE=hybrid needs REDIS_URL: the hybrid store syncs with Redis')
    return undefined
  }
  return kind === 'hybrid' ? new HybridStore({ client: redis }) : new RedisStore({ client: redis })
}
