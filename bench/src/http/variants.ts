import type { Redis } from 'ioredis'
import { CEILING_LUA } from '../contenders/raw-evalsha.js'

export type Framework = 'express' | 'fastify' | 'koa'
export const FRAMEWORKS: readonly Framework[] = ['express', 'fastify', 'koa']

/** What guards the route: nothing, the framework's incumbent, Tollgate, or the raw EVALSHA ceiling. */
export type Variant = 'none' | 'incumbent-memory' | 'incumbent-redis' | 'tollgate-memory' | 'tollgate-redis' | 'ceiling'
export const VARIANTS: readonly Variant[] = [
  'none',
  'incumbent-memory',
  'incumbent-redis',
  'tollgate-memory',
  'tollgate-redis',
  'ceiling',
]

export const INCUMBENT: Readonly<Record<Framework, { memory: string; redis: string }>> = {
  express: { memory: 'express-rate-limit (MemoryStore)', redis: 'express-rate-limit + rate-limit-redis' },
  fastify: { memory: '@fastify/rate-limit (LocalStore)', redis: '@fastify/rate-limit (redis)' },
  koa: { memory: 'koa-ratelimit (memory driver)', redis: 'koa-ratelimit (redis driver)' },
}

export function variantLabel(framework: Framework, variant: Variant): string {
  switch (variant) {
    case 'none':
      return 'no limiter'
    case 'incumbent-memory':
      return INCUMBENT[framework].memory
    case 'incumbent-redis':
      return INCUMBENT[framework].redis
    case 'tollgate-memory':
      return 'Tollgate (MemoryStore)'
    case 'tollgate-redis':
      return 'Tollgate (RedisStore)'
    case 'ceiling':
      return 'raw EVALSHA ceiling'
  }
}

export function usesRedis(variant: Variant): boolean {
  return variant === 'incumbent-redis' || variant === 'tollgate-redis' || variant === 'ceiling'
}

/** Set high enough that nothing is ever refused: every request costs a full decision. */
export const HTTP_LIMIT = 1_000_000_000
export const HTTP_PERIOD_MS = 60_000

/** The ceiling as a framework would call it: one EVALSHA per request, keyed by client address, no headers. */
export async function ceilingCheck(client: Redis): Promise<(address: string) => Promise<boolean>> {
  const sha = (await client.script('LOAD', CEILING_LUA)) as string
  const period = String(HTTP_PERIOD_MS)
  return async (address) => ((await client.evalsha(sha, 1, `ceiling:${address}`, period)) as number) <= HTTP_LIMIT
}
