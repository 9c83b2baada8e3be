import { ALGORITHMS, type AlgorithmName, createLimiter, RedisStore } from '@tollgate/core'
import type { Redis } from 'ioredis'

/** Redis MEMORY USAGE of one identifier's key (`tg:r:{ip:203.0.113.7}:<algorithm>`) after `hits` admitted requests at 100 per minute. */
export async function bytesPerKey(client: Redis, hits: number): Promise<Record<AlgorithmName, number>> {
  const result = {} as Record<AlgorithmName, number>
  for (const algorithm of ALGORITHMS) {
    // The default prefix and a one-letter rule: what a deployment's keys look like, not a bench's.
    const store = new RedisStore({ client })
    const limiter = createLimiter({ store, rules: { r: { algorithm, windows: [{ limit: 100, period: '1m' }] } } })
    for (let i = 0; i < hits; i++) await limiter.consume('r', 'ip:203.0.113.7')
    const key = store.keyOf({ rule: 'r', algorithm, windows: [], identifier: 'ip:203.0.113.7' })
    result[algorithm] = (await client.memory('USAGE', key)) as number
    await client.unlink(key)
  }
  return result
}
