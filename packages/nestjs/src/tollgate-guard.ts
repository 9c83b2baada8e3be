import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common'
import { Reflector } from '@nestjs/core'
import type { Decision, RateLimitVerdict } from '@tollgate/core'
import { RATE_LIMIT_METADATA, type RouteLimitMetadata } from './options.js'
import { requestView, respond, setHeaders } from './platform.js'
import { RouteLimits } from './route-limits.js'

/**
 * Charges each request against its route's limit (`@RateLimit`, else the module's rule), sets the
 * rate limit headers, and answers a refusal itself: 429 (413 for a cost that can never fit, 503
 * when the store fails and `onStoreError` is `'deny'`) with a problem+json body, or the response
 * `refusal` builds, as the Express, Fastify and Koa adapters answer it. The refusal does not pass
 * through the app's exception filters and interceptors, which would answer it their own way; use
 * `onLimited` to log refusals. Only HTTP requests are limited: GraphQL resolvers, WebSocket gateways
 * and microservice handlers pass.
 * @example providers: [{ provide: APP_GUARD, useClass: TollgateGuard }]
 * @example @UseGuards(TollgateGuard)
 */
@Injectable()
export class TollgateGuard implements CanActivate {
  constructor(
    @Inject(RouteLimits) private readonly limits: RouteLimits,
    @Inject(Reflector) private readonly reflector: Reflector,
  ) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    if (context.getType() !== 'http') return true
    const limit = this.reflector.getAllAndOverride<RouteLimitMetadata | undefined>(RATE_LIMIT_METADATA, [
      context.getHandler(),
      context.getClass(),
    ])
    const engine = this.limits.engineFor(limit)
    if (engine === undefined) return true
    const http = context.switchToHttp()
    const request = http.getRequest<{ rateLimit?: Decision }>()
    const response = http.getResponse<object>()
    // A verdict reached in the process is applied at once, with no promise (core's checkNow).
    const verdict = engine.checkNow(request, requestView(request, response))
    if (verdict instanceof Promise) return verdict.then((settled) => applied(request, response, settled))
    return applied(request, response, verdict)
  }
}

/** Sets the headers, then lets the request through or answers it. */
function applied(
  request: { rateLimit?: Decision },
  response: object,
  verdict: RateLimitVerdict,
): boolean | Promise<boolean> {
  setHeaders(response, verdict.headers)
  if (verdict.action === 'continue') {
    if (verdict.decision !== undefined) request.rateLimit = verdict.decision
    return true
  }
  respond(response, verdict)
  // Answered: a promise that never settles stops the request here. Returning false would send a
  // 403, and throwing would hand the app's exception filters a response already sent. A new one
  // each time: nothing refers to it once the response has gone, so it is collected with the
  // request, where one promise shared by every refusal would keep each one's continuation.
  return new Promise<boolean>(() => {})
}
