import { HybridStore, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { CEILING_LUA } from '../contenders/raw-evalsha.js'
import { STORE_TIMEOUT_MS } from '../contenders/tollgate.js'

export type Framework = 'express' | 'fastify' | 'koa'
export const FRAMEWORKS: readonly Framework[] = ['express', 'fastify', 'koa']

/**
 * What guards the route: nothing, the framework's incumbent, Tollgate, the raw EVALSHA ceiling,
 * or no limiter but Tollgate's headers (`headers-only`). Tollgate runs a fixed window, the
 * algorithm of the incumbents and of the ceiling, so that the ratios compare what the limiters
 * add; `tollgate-redis-sliding-log` shows its default, exact algorithm, whose log for the one hot
 * key holds every request of the last minute. `headers-only` sets the two headers Tollgate sends
 * on this route, with the values it sends, the way its adapter sets them, and decides nothing:
 * what answering with them costs any limiter, before it decides anything.
 */
export type Variant =
  | 'none'
  | 'headers-only'
  | 'incumbent-memory'
  | 'incumbent-redis'
  | 'tollgate-memory'
  | 'tollgate-hybrid'
  | 'tollgate-redis'
  | 'tollgate-redis-sliding-log'
  | 'ceiling'
export const VARIANTS: readonly Variant[] = [
  'none',
  'headers-only',
  'incumbent-memory',
  'incumbent-redis',
  'tollgate-memory',
  'tollgate-hybrid',
  'tollgate-redis',
  'tollgate-redis-sliding-log',
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
    case 'headers-only':
      return "no limiter, Tollgate's two headers set"
    case 'incumbent-memory':
      return INCUMBENT[framework].memory
    case 'incumbent-redis':
      return INCUMBENT[framework].redis
    case 'tollgate-memory':
      return 'Tollgate fixed-window (MemoryStore)'
    case 'tollgate-hybrid':
      return 'Tollgate fixed-window (HybridStore)'
    case 'tollgate-redis':
      return 'Tollgate fixed-window (RedisStore)'
    case 'tollgate-redis-sliding-log':
      return 'Tollgate sliding-log, the default (RedisStore)'
    case 'ceiling':
      return 'raw EVALSHA ceiling'
  }
}

export function usesRedis(variant: Variant): boolean {
  return (
    variant === 'incumbent-redis' ||
    variant === 'tollgate-hybrid' ||
    variant === 'tollgate-redis' ||
    variant === 'tollgate-redis-sliding-log' ||
    variant === 'ceiling'
  )
}

/**
 * Tollgate's options for a variant: one window of the algorithm the variant names, on the
 * MemoryStore, on a HybridStore syncing with Redis over `client` each second, or on a RedisStore
 * over `client`.
 */
export function tollgateOptions(
  variant: Variant,
  client: Redis | undefined,
): {
  windows: Array<{ limit: number; period: number }>
  algorithm: 'fixed-window' | 'sliding-log'
  storeTimeoutMs: number
  store: Store
} {
  return {
    windows: [{ limit: HTTP_LIMIT, period: HTTP_PERIOD_MS }],
    algorithm: variant === 'tollgate-redis-sliding-log' ? 'sliding-log' : 'fixed-window',
    storeTimeoutMs: STORE_TIMEOUT_MS,
    store:
      variant === 'tollgate-memory'
        ? new MemoryStore()
        : variant === 'tollgate-hybrid'
          ? new HybridStore({ client: client! })
          : new RedisStore({ client: client! }),
  }
}

/**
 * The headers Tollgate's adapters send on the bench's route (draft-10, its default: the inline
 * rule's policy and what is left of it), with values of the lengths they have there.
 */
export const TOLLGATE_HEADERS: Readonly<Record<string, string>> = {
  'RateLimit-Policy': '"inline:fixed-window:1000000000/1m-60s";q=1000000000;w=60',
  RateLimit: '"inline:fixed-window:1000000000/1m-60s";r=999999999;t=55',
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
