// Declarations only, shipped as they are and referenced by both dist/index.d.ts and
// dist/index.d.cts: a module augmentation in each entry point's own declarations would declare the
// same properties twice, with types of two different files, and a program importing the plugin
// both as ESM and as CommonJS would not compile. Types come from the ESM entry in both cases.
import type { Decision, RateLimit, RateLimitVerdict } from '@tollgate/core'
import type { FastifyReply } from 'fastify'
import type { RouteRateLimitOptions } from './index.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's limit: options that override the plugin's, or `false` for no limit. */
    rateLimit?: RouteRateLimitOptions | false
  }
  interface FastifyRequest {
    /** The decision that let this request through; undefined when no limit ran or `skip` skipped it. */
    rateLimit?: Decision
  }
  interface FastifyInstance {
    tollgate: {
      /** The plugin-wide engine, made from the plugin's options; undefined with `global: false` and no rule of the plugin's own. */
      readonly engine: RateLimit<FastifyRequest> | undefined
      /** @deprecated The same as `engine`: a name that read as a number. */
      readonly limit: RateLimit<FastifyRequest> | undefined
      /**
       * Checks a limit by hand and returns the verdict for you to apply. With `route`, the
       * engine for those route options, made once per options object. With `reply`, `countOnly`
       * watches its response; without, every response counts.
       */
      check(request: FastifyRequest, route?: RouteRateLimitOptions, reply?: FastifyReply): Promise<RateLimitVerdict>
    }
  }
}
