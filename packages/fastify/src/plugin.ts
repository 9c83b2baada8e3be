import { createRateLimit, createRouteRateLimit, type RateLimit, TollgateConfigError } from '@tollgate/core'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import {
  checkedGlobal,
  checkedHook,
  type RateLimitHookName,
  type RouteRateLimitOptions,
  type TollgatePluginOptions,
} from './options.js'
import { type RateLimitHook, rateLimitHook } from './rate-limit-hook.js'
import { requestView } from './request-view.js'

/** The plugin's own options, which core is told of only to list them when an option is unknown. */
const PLUGIN_OPTIONS = ['global', 'hook']
const ROUTE_OPTIONS = ['hook']

interface RouteLimit {
  engine: RateLimit<FastifyRequest>
  hook: RateLimitHookName
  run: RateLimitHook
}

const plugin: FastifyPluginAsync<TollgatePluginOptions> = async (fastify, options) => {
  const { global: limitEveryRoute = true, hook = 'onRequest', ...rateLimitOptions } = options
  checkedGlobal(limitEveryRoute)
  checkedHook(hook, 'option hook')
  // With `global: false` the plugin's options may hold no rule at all: only the routes bring theirs.
  const ownRule = ['limiter', 'rules', 'windows'].some(
    (key) => (rateLimitOptions as Record<string, unknown>)[key] !== undefined,
  )
  const limit =
    limitEveryRoute || ownRule ? createRateLimit<FastifyRequest>(rateLimitOptions, PLUGIN_OPTIONS) : undefined
  const pluginLimit: RouteLimit | undefined = limit && { engine: limit, hook, run: rateLimitHook(limit) }
  const enginesToClose = limit ? [limit] : []
  const routeLimits = new WeakMap<RouteRateLimitOptions, RouteLimit>()

  /** One engine per options object: routes given the same object share its limit. */
  function routeLimit(route: RouteRateLimitOptions, routeId?: string): RouteLimit {
    let made = routeLimits.get(route)
    if (made) return made
    // Anything but an object goes to core as given, for core's own error.
    const { hook: routeHook = hook, ...overrides } = isRecord(route) ? route : {}
    const checkedRouteHook = checkedHook(routeHook, 'route option hook')
    const engine = createRouteRateLimit(
      limit ?? rateLimitOptions,
      isRecord(route) ? overrides : route,
      routeId,
      ROUTE_OPTIONS,
    )
    // A route naming only a rule shares the plugin's limiter: nothing of its own to close.
    if (engine.limiter !== limit?.limiter) enginesToClose.push(engine)
    made = { engine, hook: checkedRouteHook, run: rateLimitHook(engine) }
    routeLimits.set(route, made)
    return made
  }

  fastify.decorateRequest('rateLimit', undefined)
  fastify.decorate('tollgate', {
    limit,
    check: (request: FastifyRequest, route?: RouteRateLimitOptions, reply?: FastifyReply) => {
      const engine = route === undefined ? limit : routeLimit(route).engine
      if (!engine)
        throw new TollgateConfigError('fastify.tollgate.check needs route options: the plugin has no rule of its own')
      return engine.check(request, requestView(request, reply))
    },
  })

  // onRoute sees only routes added after this plugin loaded: hence `await app.register(tollgate)`.
  const seen = new Set<string>()
  if (fastify.printRoutes() !== EMPTY_ROUTER) {
    const { onWarning } = rateLimitOptions
    const warn = typeof onWarning === 'function' ? onWarning : emitWarning
    fastify.addHook('onRequest', unlimitedRouteWarning(seen, limitEveryRoute, warn))
  }
  fastify.addHook('onRoute', (routeOptions) => {
    const routeId = `${[routeOptions.method].flat().join(',')} ${routeOptions.url}`
    seen.add(routeId)
    const route = routeOptions.config?.rateLimit
    if (route === false || (route === undefined && !limitEveryRoute)) return
    let chosen: RouteLimit
    try {
      chosen = route === undefined ? (pluginLimit as RouteLimit) : routeLimit(route, routeId)
    } catch (error) {
      if (!(error instanceof TollgateConfigError)) throw error
      throw new TollgateConfigError(`route ${routeId}: ${error.message}`)
    }
    appendHook(routeOptions, chosen)
  })

  fastify.addHook('onClose', async () => {
    await Promise.all(enginesToClose.map((engine) => engine.close()))
  })
}

/** What `printRoutes` says of a router without routes. */
const EMPTY_ROUTER = '(empty tree)'

const emitWarning = (message: string, code: string) => process.emitWarning(message, { code })

/**
 * Routes added before the plugin loaded (`app.register(tollgate, …)` not awaited, then
 * `app.get(…)` in the same tick) never reach `onRoute`, so they would go unlimited without a
 * word. Fastify lists no routes, but hooks added now still apply to them: on its first request,
 * each route the limit should cover and `onRoute` never saw is named once (`TG_ROUTE_NOT_LIMITED`).
 * Added only when routes existed as the plugin loaded, so that an app which awaits pays nothing.
 */
function unlimitedRouteWarning(
  seen: ReadonlySet<string>,
  limitEveryRoute: boolean,
  warn: (message: string, code: string) => void,
) {
  const checked = new WeakSet<object>()
  return (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
    const config = request.routeOptions.config
    if (!checked.has(config)) {
      checked.add(config)
      const { url, method, rateLimit } = config
      const routeId = `${[method].flat().join(',')} ${url}`
      const covered = rateLimit !== false && (rateLimit !== undefined || limitEveryRoute)
      if (url !== undefined && covered && !seen.has(routeId)) {
        warn(
          `route ${routeId} was added before @tollgate/fastify loaded, so it is not limited: await app.register(tollgate, …) before adding routes`,
          'TG_ROUTE_NOT_LIMITED',
        )
      }
    }
    done()
  }
}

/** A route with its own config runs only its own engine, so it is never charged by the plugin's too. */
function appendHook(routeOptions: RouteOptions, { hook, run }: RouteLimit): void {
  // A new array each time: the one given may be shared with other routes.
  if (hook === 'onRequest') routeOptions.onRequest = [...asArray(routeOptions.onRequest), run]
  else routeOptions.preHandler = [...asArray(routeOptions.preHandler), run]
}

function asArray<T>(value: T | readonly T[] | undefined): readonly T[] {
  if (value === undefined) return []
  return Array.isArray(value) ? value : [value as T]
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The Fastify plugin: a limit for every route, per-route `config.rateLimit`, and `fastify.tollgate`. */
export const tollgate: FastifyPluginAsync<TollgatePluginOptions> = fp(plugin, {
  name: '@tollgate/fastify',
  fastify: '5.x',
})
