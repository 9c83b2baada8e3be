import type { Redis } from 'ioredis'

/** Script calls (EVALSHA and EVAL) the server ran since its statistics were last reset, as INFO commandstats counts them. */
export async function scriptCalls(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats')
  return [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((sum, [, n]) => sum + Number(n), 0)
}
