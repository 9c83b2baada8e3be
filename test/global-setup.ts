import type { TestProject } from 'vitest/node'
import './src/provided-context.js'
import { startRedis } from './src/redis-harness.js'

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedis()
  process.stderr.write(`Tests use Redis from ${redis.source}: ${withoutPassword(redis.url)}\n`)
  provide('redisUrl', redis.url)
  return () => redis.stop()
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
