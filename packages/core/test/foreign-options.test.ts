import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { createRateLimit } from '../src/http/rate-limit.js'
import { RATE_LIMIT_OPTION_KEYS, type RateLimitOptions } from '../src/http/rate-limit-options.js'
import { createRouteRateLimit } from '../src/http/route-rate-limit.js'
import { createLimiter } from '../src/limiter/limiter.js'
import { TollgateConfigError } from '../src/support/errors.js'
import { LIMITER_FOREIGN_OPTIONS, MIDDLEWARE_FOREIGN_OPTIONS } from '../src/support/foreign-options.js'

const MIGRATING = 'https://github.com/tollgate-js/tollgate/blob/main/docs/migrating.md'
const windows = [{ limit: 5, period: '1m' }] as const

function configError(make: () => unknown): string {
  try {
    make()
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    return (error as Error).message
  }
  throw new Error('no error was thrown')
}

describe("other rate limiters' options", () => {
  // Regression: express-rate-limit's options were refused as unknown with a list of ours and no
  // word of which one replaces them.
  it("name the Tollgate option that replaces express-rate-limit's, and the page that maps them", () => {
    const message = configError(() =>
      createRateLimit({ windowMs: 15 * 60_000, max: 100 } as unknown as RateLimitOptions<unknown>),
    )
    expect(message).toBe(
      `rate limit options: unknown option 'windowMs': windowMs is express-rate-limit's option; Tollgate's is windows: [{ limit, period }], such as windows: [{ limit: 100, period: '15m' }] (period: milliseconds or '15m') (${MIGRATING}#from-express-rate-limit)`,
    )
    const replacements: Record<string, string> = {
      limit: 'windows: [{ limit, period }]',
      keyGenerator: 'identify: (req, client)',
      legacyHeaders: "headers: 'legacy'",
      standardHeaders: "headers: 'draft-10'",
      handler: 'refusal: (decision, req, standard)',
      message: 'problem: (decision, req)',
      statusCode: 'refusal: (decision, req, standard)',
      skipSuccessfulRequests: "countOnly: 'failures'",
      validate: "ignoreWarnings: ['TG_UNTRUSTED_FORWARDED_FOR']",
    }
    for (const [option, replacement] of Object.entries(replacements)) {
      const text = configError(() => createRateLimit({ windows, [option]: 1 } as unknown as RateLimitOptions<unknown>))
      expect(text, option).toContain(`unknown option '${option}': ${option} is express-rate-limit`)
      expect(text, option).toContain(`Tollgate's is ${replacement}`)
      expect(text, option).toContain(`${MIGRATING}#from-express-rate-limit`)
    }
  })

  it("name ours for @fastify/rate-limit's in a route's config, and for rate-limiter-flexible's in createLimiter", () => {
    const base = createRateLimit<unknown>({ windows })
    const route = configError(() =>
      createRouteRateLimit(base, { max: 5, timeWindow: '1 minute' } as never, 'POST /login', ['hook']),
    )
    expect(route).toMatch(
      /^route rate limit options: unknown option 'max': max is express-rate-limit, @fastify\/rate-limit and koa-ratelimit's option; Tollgate's is windows: \[\{ limit, period \}\]/,
    )
    const timeWindow = configError(() => createRouteRateLimit(base, { timeWindow: '1 minute' } as never, 'GET /'))
    expect(timeWindow).toContain(`timeWindow is @fastify/rate-limit's option; Tollgate's is windows:`)
    expect(timeWindow).toContain(`${MIGRATING}#from-fastifyrate-limit`)

    const limiter = configError(() => createLimiter({ points: 10, duration: 1 } as never))
    expect(limiter).toBe(
      `createLimiter options: unknown option 'points': points is rate-limiter-flexible's option; Tollgate's is a rule's windows: rules: { api: { windows: [{ limit: 100, period: '15m' }] } } (period: milliseconds or '15m') (${MIGRATING}#from-rate-limiter-flexible)`,
    )
  })

  it('keep the list of known options for a key no other limiter has', () => {
    expect(configError(() => createRateLimit({ windows, limt: 5 } as never))).toMatch(
      /^rate limit options: unknown option 'limt'; known options are 'limiter', /,
    )
  })

  it('never shadow an option of ours, the adapters’ included', () => {
    const adapterOptions = ['global', 'hook', 'throw']
    for (const key of MIDDLEWARE_FOREIGN_OPTIONS.keys()) {
      expect(RATE_LIMIT_OPTION_KEYS.has(key), key).toBe(false)
      expect(adapterOptions, key).not.toContain(key)
    }
    for (const key of LIMITER_FOREIGN_OPTIONS.keys()) {
      expect(() => createLimiter({ rules: { api: { windows } }, [key]: 1 } as never), key).toThrow(
        `unknown option '${key}': ${key} is `,
      )
    }
  })

  it('link sections docs/migrating.md has', () => {
    const migrating = readFileSync(new URL('../../../docs/migrating.md', import.meta.url), 'utf8')
    const anchors = new Set(
      [...migrating.matchAll(/^## (.+)$/gm)].map((match) =>
        (match[1] as string)
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replaceAll(' ', '-'),
      ),
    )
    for (const sentence of [...MIDDLEWARE_FOREIGN_OPTIONS.values(), ...LIMITER_FOREIGN_OPTIONS.values()]) {
      const anchor = sentence.slice(sentence.lastIndexOf('#') + 1, -1)
      expect(anchors, sentence).toContain(anchor)
    }
  })
})
