import type { TestProject } from 'vitest/node'
import './src/provided-context.js'
import { startRedis } from './src/redis-harness.js'
import { assertEveryKeyExpires } from './src/ttl-audit.js'

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedis()
  process.stderr.write(`Tests use Redis from ${redis.source}: ${withoutPassword(redis.url)}\n`)
  provide('redisUrl', redis.url)
  return async () => {
    try {
      // A server named by REDIS_URL may hold keys no test wrote, so only a server started here is audited.
      if (redis.source === 'REDIS_URL') process.stderr.write('TTL audit skipped: the Redis of REDIS_URL is not ours\n')
      else await assertEveryKeyExpires(redis.url)
    } finally {
      await redis.stop()
    }
  }
}

function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(REDIS_URL is not a URL)'
  }
}
