import { createRateLimit, createRouteRateLimit, type RateLimit, TollgateConfigError } from '@tollgate/core'
import type { FastifyContextConfig, FastifyPluginAsync, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
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
    engine: limit,
    limit,
    check: (request: FastifyRequest, route?: RouteRateLimitOptions, reply?: FastifyReply) => {
      const engine = route === undefined ? limit : routeLimit(route).engine
      if (!engine)
        throw new TollgateConfigError('fastify.tollgate.check needs route options: the plugin has no rule of its own')
      return engine.check(request, requestView(request, reply))
    },
  })

  /** The limit a route's config asks for: undefined for none. */
  function chosenLimit(route: RouteRateLimitOptions | false | undefined, routeId: string): RouteLimit | undefined {
    if (route === false || (route === undefined && !limitEveryRoute)) return undefined
    try {
      return route === undefined ? pluginLimit : routeLimit(route, routeId)
    } catch (error) {
      if (!(error instanceof TollgateConfigError)) throw error
      throw new TollgateConfigError(`route ${routeId}: ${error.message}`)
    }
  }

  // Routes added before this plugin loaded (a register not awaited, as CommonJS apps write it)
  // never reach onRoute: app-wide hooks limit them instead. Added only when such routes exist.
  if (fastify.printRoutes() !== EMPTY_ROUTER) {
    const earlyRoutes = new WeakMap<object, RouteLimit | null>()
    for (const hookName of HOOK_NAMES) {
      fastify.addHook(hookName, earlyRouteHook(hookName, earlyRoutes, chosenLimit))
    }
  }
  fastify.addHook('onRoute', (routeOptions) => {
    const config: HookedConfig = { ...routeOptions.config, [HOOKED]: true }
    routeOptions.config = config
    const routeId = `${[routeOptions.method].flat().join(',')} ${routeOptions.url}`
    const chosen = chosenLimit(config.rateLimit, routeId)
    if (chosen) appendHook(routeOptions, chosen)
  })

  fastify.addHook('onClose', async () => {
    await Promise.all(enginesToClose.map((engine) => engine.close()))
  })
}

/** What `printRoutes` says of a router without routes. */
const EMPTY_ROUTER = '(empty tree)'

const HOOK_NAMES: readonly RateLimitHookName[] = ['onRequest', 'preHandler']

/** Set on the config of every route `onRoute` saw, which then carries its limit in its own hooks. */
const HOOKED = Symbol('tollgate: limited by its own hooks')

type HookedConfig = FastifyContextConfig & { [HOOKED]?: true }

/**
 * The app-wide hook that limits routes added before the plugin loaded: `app.register(tollgate, …)`
 * not awaited, then `app.get(…)` in the same tick, as CommonJS code without top-level await has
 * it. Fastify showed those routes to no `onRoute` hook of ours, but gathers each route's hooks at
 * `ready`, so app-wide hooks added now apply to them. The route's config is read at its first
 * request (Fastify lists no routes); a route whose config is wrong fails its requests through
 * Fastify's error handler, since it was added before any check could run.
 */
function earlyRouteHook(
  hookName: RateLimitHookName,
  earlyRoutes: WeakMap<object, RouteLimit | null>,
  chosenLimit: (route: RouteRateLimitOptions | false | undefined, routeId: string) => RouteLimit | undefined,
): RateLimitHook {
  // Named, for `printRoutes({ includeHooks: true })`.
  return function limitEarlyRoute(request, reply, done) {
    const config: FastifyRequest['routeOptions']['config'] & HookedConfig = request.routeOptions.config
    // The not-found handler (no url) is not a route; a hooked route has its limit already.
    if (config[HOOKED] === true || config.url === undefined) {
      done()
      return
    }
    let chosen = earlyRoutes.get(config)
    if (chosen === undefined) {
      try {
        chosen = chosenLimit(config.rateLimit, `${[config.method].flat().join(',')} ${config.url}`) ?? null
      } catch (error) {
        done(error as Error)
        return
      }
      earlyRoutes.set(config, chosen)
    }
    if (chosen === null || chosen.hook !== hookName) done()
    else chosen.run(request, reply, done)
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
