/// <reference path="./augmentation.d.ts" />
export type { Decision, RateLimitOptions } from '@tollgate/core'
export { byIpAndUser, ipIdentifier, userIdentifier } from '@tollgate/core'
export type { FastifyRateLimitOptions, RouteRateLimitOptions, TollgatePluginOptions } from './options.js'
export { tollgate, tollgate as default } from './plugin.js'
