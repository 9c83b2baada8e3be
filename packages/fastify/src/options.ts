import { inspect } from 'node:util'
import { type RateLimitOptions, TollgateConfigError } from '@tollgate/core'
import type { FastifyRequest } from 'fastify'

/** The options every Tollgate adapter takes, with Fastify's `request` as the request. */
export type FastifyRateLimitOptions = RateLimitOptions<FastifyRequest>

export type RateLimitHookName = 'onRequest' | 'preHandler'

const HOOKS: readonly RateLimitHookName[] = ['onRequest', 'preHandler']

export interface TollgatePluginOptions extends FastifyRateLimitOptions {
  /**
   * Apply the limit to every route that does not configure its own; with `false`, only routes
   * with `config: { rateLimit: { … } }` are limited.
   * @default true
   */
  global?: boolean
  /**
   * The hook that checks: `'onRequest'` runs before the body is parsed (cheapest);
   * `'preHandler'` runs after your auth hooks, so `identify` can read the user they set.
   * @default 'onRequest'
   * @example 'preHandler'
   */
  hook?: RateLimitHookName
}

/**
 * A route's `config.rateLimit`: overrides the plugin's options for that route. Naming only a
 * `rule` decides with the plugin's limiter; giving `windows` makes a limiter for the route.
 * @example { rule: 'api.write' }
 * @example { windows: [{ limit: 5, period: '1m' }], rule: 'login', hook: 'preHandler' }
 */
export type RouteRateLimitOptions = Partial<FastifyRateLimitOptions> & { hook?: RateLimitHookName }

export function checkedHook(value: unknown, option: string): RateLimitHookName {
  if (!HOOKS.includes(value as RateLimitHookName)) {
    throw new TollgateConfigError(`${option} must be 'onRequest' or 'preHandler', got ${inspect(value)}`)
  }
  return value as RateLimitHookName
}

export function checkedGlobal(value: unknown): boolean {
  if (typeof value !== 'boolean')
    throw new TollgateConfigError(`option global must be a boolean, got ${inspect(value)}`)
  return value
}
