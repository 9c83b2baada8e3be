export type { Decision, RateLimitOptions } from '@tollgate/core'
export { byIpAndUser, ipIdentifier, userIdentifier } from '@tollgate/core'
export { RateLimit, RateLimitDecision, SkipRateLimit } from './decorators.js'
export type {
  NestRequest,
  RouteRateLimitOptions,
  TollgateModuleAsyncOptions,
  TollgateModuleOptions,
} from './options.js'
export { TollgateGuard } from './tollgate-guard.js'
export { TollgateModule } from './tollgate-module.js'
