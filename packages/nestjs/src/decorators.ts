import { createParamDecorator, type ExecutionContext, SetMetadata } from '@nestjs/common'
import type { Decision, RateLimitOptions } from '@tollgate/core'
import {
  type NestRequest,
  RATE_LIMIT_METADATA,
  type RouteLimitMetadata,
  type RouteRateLimitOptions,
} from './options.js'

type ControllerDecorator = ClassDecorator & MethodDecorator

/**
 * Limits a controller's routes, or one handler, by a limit of their own instead of the module's:
 * the name of one of the module's rules, a function of the request that names one (a limit per
 * plan), or route options over the module's. A handler's decorator wins over its controller's.
 * The routes still need `TollgateGuard`, globally through `APP_GUARD` or with `@UseGuards`.
 * @example @RateLimit('auth.login')
 * @example @RateLimit((req: Request) => (req.user?.plan === 'pro' ? 'api.pro' : 'api.free'))
 * @example @RateLimit({ windows: [{ limit: 5, period: '1m' }], countOnly: 'failures' })
 */
export function RateLimit<Req = NestRequest>(
  rule: NonNullable<RateLimitOptions<Req>['rule']> | RouteRateLimitOptions<Req>,
): ControllerDecorator {
  const route = (typeof rule === 'object' ? rule : { rule }) as RouteRateLimitOptions<unknown>
  return (target: object, key?: string | symbol, descriptor?: PropertyDescriptor) => {
    // Names inline windows given no rule: the same on every start, and apart from other routes'.
    const routeId = key === undefined ? (target as { name: string }).name : `${target.constructor.name}.${String(key)}`
    applied(SetMetadata(RATE_LIMIT_METADATA, { route, routeId } satisfies RouteLimitMetadata), target, key, descriptor)
  }
}

/**
 * Leaves a controller's routes, or one handler, unlimited whatever the module's options say. A
 * handler's own `@RateLimit` still limits it under a controller's `@SkipRateLimit`.
 * @example @SkipRateLimit()
 */
export function SkipRateLimit(): ControllerDecorator {
  return SetMetadata(RATE_LIMIT_METADATA, false satisfies RouteLimitMetadata)
}

/**
 * The decision that let the request through, as a handler's parameter: every window's
 * `remaining` and `resetAtMs`. Undefined when no limit applied or `skip` skipped the request.
 * The guard also leaves it on the request as `rateLimit`.
 * @example list(@RateLimitDecision() decision: Decision | undefined) { return { left: decision?.windows[0]?.remaining } }
 */
export const RateLimitDecision = createParamDecorator(
  (_data: unknown, context: ExecutionContext): Decision | undefined =>
    context.switchToHttp().getRequest<{ rateLimit?: Decision }>().rateLimit,
)

function applied(
  decorator: ControllerDecorator,
  target: object,
  key: string | symbol | undefined,
  descriptor: PropertyDescriptor | undefined,
): void {
  if (key === undefined || descriptor === undefined) decorator(target as () => void)
  else decorator(target, key, descriptor)
}
