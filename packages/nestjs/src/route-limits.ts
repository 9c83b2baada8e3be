import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common'
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core'
import {
  createRateLimit,
  createRouteRateLimit,
  type RateLimit,
  TollgateConfigError,
  TollgateError,
} from '@tollgate/core'
import {
  RATE_LIMIT_METADATA,
  type RouteLimitMetadata,
  type RouteRateLimitOptions,
  TOLLGATE_OPTIONS,
  type TollgateModuleOptions,
} from './options.js'

type Engine = RateLimit<unknown>

/**
 * The engines of one `TollgateModule`: the module's, made from its options, and one per
 * `@RateLimit`, made from the route's options over the module's by core's `createRouteRateLimit`.
 * Every route's engine is made as the app starts, so that a bad option fails the start.
 */
@Injectable()
export class RouteLimits implements OnModuleInit, OnApplicationShutdown {
  /**
   * Made when the options hold a limiter, `rules` or `windows`: the limit of routes without a
   * `@RateLimit` when the options name a rule, and the limiter of routes that name only a rule.
   */
  private readonly moduleLimit: Engine | undefined
  private readonly limitsEveryRoute: boolean
  private readonly routeLimits = new WeakMap<RouteRateLimitOptions<unknown>, Engine>()
  private readonly toClose: Engine[] = []

  constructor(
    @Inject(TOLLGATE_OPTIONS) private readonly options: TollgateModuleOptions<unknown>,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(Reflector) private readonly reflector: Reflector,
  ) {
    const raw = (options ?? {}) as Partial<Record<keyof TollgateModuleOptions<unknown>, unknown>>
    this.limitsEveryRoute = raw.rule !== undefined || raw.windows !== undefined
    const hasLimiter = raw.limiter !== undefined || raw.rules !== undefined || raw.windows !== undefined
    // Anything but an object goes to core too, for core's own error.
    if (this.limitsEveryRoute || hasLimiter || typeof options !== 'object' || options === null) {
      this.moduleLimit = createRateLimit(this.limitsEveryRoute ? options : { ...options, rule: noModuleRule })
      this.toClose.push(this.moduleLimit)
    }
  }

  /** The engine for a route, from what the decorators left on it; undefined for a route not limited. */
  engineFor(limit: RouteLimitMetadata | undefined): Engine | undefined {
    if (limit === false) return undefined
    if (limit === undefined) return this.limitsEveryRoute ? this.moduleLimit : undefined
    let engine = this.routeLimits.get(limit.route)
    if (engine === undefined) {
      engine = this.made(limit)
      this.routeLimits.set(limit.route, engine)
    }
    return engine
  }

  onModuleInit(): void {
    for (const { metatype } of this.discovery.getControllers()) {
      if (typeof metatype !== 'function') continue
      this.engineFor(this.reflector.get(RATE_LIMIT_METADATA, metatype))
      const prototype = metatype.prototype as Record<string, unknown>
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[name]
        if (typeof handler === 'function') this.engineFor(this.reflector.get(RATE_LIMIT_METADATA, handler))
      }
    }
  }

  /** After the HTTP server has closed: no request is left to decide. A route's own limiter first, the store last. */
  async onApplicationShutdown(): Promise<void> {
    for (const engine of this.toClose.splice(0).reverse()) await engine.close()
  }

  private made({ route, routeId }: Exclude<RouteLimitMetadata, false>): Engine {
    const namesNone =
      isRecord(route) && (['rule', 'windows', 'rules', 'limiter'] as const).every((key) => route[key] === undefined)
    if (this.moduleLimit && !this.limitsEveryRoute && namesNone) {
      throw new TollgateConfigError(
        `@RateLimit on ${routeId} names no rule, and TollgateModule's options name none for it: give one, e.g. @RateLimit({ rule: 'api', … })`,
      )
    }
    let engine: Engine
    try {
      engine = createRouteRateLimit(this.moduleLimit ?? this.options, route, routeId)
    } catch (error) {
      if (!(error instanceof TollgateConfigError)) throw error
      throw new TollgateConfigError(`@RateLimit on ${routeId}: ${error.message}`)
    }
    // A route naming only a rule decides with the module's limiter: nothing of its own to close.
    if (engine.limiter !== this.moduleLimit?.limiter) this.toClose.push(engine)
    return engine
  }
}

/**
 * The rule of a module whose options name none. Core wants a rule for every engine, and a function
 * of the request may stand for it with a limiter or rules; this one is never asked, since such a
 * module limits only routes with a `@RateLimit`, each of which names its own.
 */
function noModuleRule(): never {
  throw new TollgateError('TG_UNKNOWN_RULE', "TollgateModule's options name no rule")
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
