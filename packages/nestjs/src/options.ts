import type { IncomingHttpHeaders } from 'node:http'
import type { FactoryProvider, ModuleMetadata } from '@nestjs/common'
import type { RateLimitOptions } from '@tollgate/core'

/**
 * The request the guard hands to `identify`, `cost`, `skip`, a `rule` function and the other
 * callbacks: Express's `req` on @nestjs/platform-express, Fastify's `request` on
 * @nestjs/platform-fastify. Only what both have is typed here; name your platform's type in the
 * callback's parameter, and the options take it.
 * @example identify: (req: Request) => [`user:${req.user.id}`]
 */
export interface NestRequest {
  readonly headers: IncomingHttpHeaders
}

/**
 * The options of `TollgateModule.forRoot`: `@tollgate/core`'s HTTP options, the same as the
 * Express, Fastify and Koa adapters take. The rule they name (`rule`, or inline `windows`) limits
 * every route `TollgateGuard` covers that has no `@RateLimit` of its own; without one (a
 * `limiter` or `rules` and no `rule`), only routes with `@RateLimit` are limited. Every option is
 * checked when the module is built, so a bad one fails the app's start with `TollgateConfigError`.
 * @example { limiter, rule: 'api', identify: byIpAndUser((req: Request) => req.user?.id) }
 * @example { windows: [{ limit: 100, period: '1m' }] }
 */
export type TollgateModuleOptions<Req = NestRequest> = RateLimitOptions<Req>

/** The options of `TollgateModule.forRootAsync`: the module's options, made by a factory Nest injects. */
export interface TollgateModuleAsyncOptions<Req = NestRequest> extends Pick<ModuleMetadata, 'imports'> {
  /**
   * Returns the module's options, or a promise of them, from the providers named in `inject`.
   * As with `forRoot`, a `limiter` among them stays yours to close; one the module makes from
   * `rules` or `windows` is closed when the app shuts down.
   * @example (config: ConfigService) => ({ limiter: createLimiter({ rules, store: storeFor(config) }), rule: 'api' })
   */
  useFactory: (...args: never[]) => TollgateModuleOptions<Req> | Promise<TollgateModuleOptions<Req>>
  /**
   * The providers `useFactory` receives, in order, from the module's `imports` or global modules.
   * @default []
   * @example [ConfigService]
   */
  inject?: FactoryProvider['inject']
}

/**
 * A controller's or handler's own options, given to `@RateLimit`: they override the module's for
 * that route. Naming only a `rule` decides with the module's limiter; inline `windows` make a rule
 * of the route's own, named after its controller and handler (`UploadsController.upload`) unless
 * `rule` names it, counted on the module's store. Routes given the same options object share one
 * limit.
 * @example { rule: 'upload.bytes', cost: (req: Request) => Number(req.headers['content-length']) }
 * @example { windows: [{ limit: 5, period: '1m' }], countOnly: 'failures' }
 */
export type RouteRateLimitOptions<Req = NestRequest> = Partial<RateLimitOptions<Req>>

/** What `@RateLimit` and `@SkipRateLimit` leave on a controller or a handler. */
export type RouteLimitMetadata = { route: RouteRateLimitOptions<unknown>; routeId: string } | false

/**
 * The metadata key of both decorators. A string rather than a symbol: an app that loads this
 * package twice, as ESM and as CommonJS, still reads in one copy what the other's decorators wrote.
 */
export const RATE_LIMIT_METADATA = 'tollgate:rate-limit'

export const TOLLGATE_OPTIONS = 'tollgate:module-options'
