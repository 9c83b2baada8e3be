import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { createRateLimit, type RateLimit, type RequestView } from '../src/http/rate-limit.js'
import type { RateLimitOptions } from '../src/http/rate-limit-options.js'
import { RATE_LIMIT_WARNING_CODES } from '../src/http/warnings.js'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import type { LimiterOptions } from '../src/limiter/limiter-config.js'
import { LIMITER_WARNING_CODES } from '../src/limiter/limiter-warnings.js'
import type { RulesOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import { TollgateConfigError } from '../src/support/errors.js'

const opened: Array<Limiter | RateLimit<unknown>> = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((closable) => closable.close()))
})

/** A rule whose period is a bare number of milliseconds (`TG_PERIOD_IN_MS`) and one with a window that never binds (`TG_WINDOW_NEVER_BINDS`). */
const WARNED_RULES = {
  fast: { windows: [{ limit: 1, period: 500 }] },
  dead: {
    windows: [
      { limit: 10, period: '10s' },
      { limit: 600, period: '600s' },
    ],
  },
} satisfies RulesOptions

function limiterWarnings(options: Partial<LimiterOptions>): string[] {
  const codes: string[] = []
  const limiter = createLimiter({
    store: new MemoryStore({ sweepIntervalMs: 0 }),
    rules: WARNED_RULES,
    onWarning: (_message, code) => codes.push(code),
    ...options,
  })
  opened.push(limiter)
  return codes
}

function engine(options: Partial<RateLimitOptions<unknown>>, codes: string[]): RateLimit<unknown> {
  const made = createRateLimit<unknown>({
    store: new MemoryStore({ sweepIntervalMs: 0 }),
    windows: [{ limit: 5, period: '1m' }],
    onWarning: (_message, code) => codes.push(code),
    ...options,
  })
  opened.push(made)
  return made
}

function configError(build: () => unknown): string {
  try {
    build()
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    return (error as Error).message
  }
  throw new Error('expected a TollgateConfigError')
}

const NO_PROXY: RequestView = { ip: '203.0.113.7', forwardedFor: '198.51.100.1', proxyTrusted: false }
const NO_ADDRESS: RequestView = { ip: undefined, forwardedFor: undefined, proxyTrusted: false }

describe('createLimiter option ignoreWarnings', () => {
  it('leaves out the warnings of the codes it names, and only those', () => {
    expect(limiterWarnings({})).toEqual(['TG_PERIOD_IN_MS', 'TG_WINDOW_NEVER_BINDS'])
    expect(limiterWarnings({ ignoreWarnings: ['TG_PERIOD_IN_MS'] })).toEqual(['TG_WINDOW_NEVER_BINDS'])
    expect(limiterWarnings({ ignoreWarnings: ['TG_WINDOW_NEVER_BINDS', 'TG_PERIOD_IN_MS'] })).toEqual([])
    expect(limiterWarnings({ ignoreWarnings: [] })).toHaveLength(2)
  })

  it.each<[string, unknown, string]>([
    [
      'a code alone',
      'TG_PERIOD_IN_MS',
      `createLimiter option ignoreWarnings must be an array of warning codes, such as ['TG_WINDOW_NEVER_BINDS'], got "TG_PERIOD_IN_MS"`,
    ],
    [
      'an unknown code',
      ['TG_PERIOD_IN_SECONDS'],
      `createLimiter option ignoreWarnings: "TG_PERIOD_IN_SECONDS" is not a warning code it emits; known codes are 'TG_WINDOW_NEVER_BINDS', `,
    ],
    [
      "a middleware's own code",
      ['TG_UNTRUSTED_FORWARDED_FOR'],
      '"TG_UNTRUSTED_FORWARDED_FOR" is not a warning code it emits',
    ],
    ['a code that is not a string', [42], 'createLimiter option ignoreWarnings: 42 is not a warning code it emits'],
  ])('refuses %s, naming the option and the value', (_, ignoreWarnings, message) => {
    expect(configError(() => createLimiter({ rules: WARNED_RULES, ignoreWarnings } as never))).toContain(message)
  })
})

describe('rate limit option ignoreWarnings', () => {
  it("leaves out the middleware's warnings of the codes it names, and keeps the others", async () => {
    const codes: string[] = []
    const limit = engine({ ignoreWarnings: ['TG_UNTRUSTED_FORWARDED_FOR'] }, codes)
    await limit.check({}, NO_PROXY)
    await limit.check({}, NO_ADDRESS)
    expect(codes).toEqual(['TG_NO_CLIENT_ADDRESS'])
  })

  it('leaves them out of the warnings of the limiter it makes', () => {
    const kept: string[] = []
    engine({ windows: [{ limit: 5, period: 500 }] }, kept)
    const ignored: string[] = []
    engine({ windows: [{ limit: 5, period: 500 }], ignoreWarnings: ['TG_PERIOD_IN_MS'] }, ignored)
    expect([kept, ignored]).toEqual([['TG_PERIOD_IN_MS'], []])
  })

  it.each<[string, unknown, string]>([
    ['a code alone', 'TG_NO_CLIENT_ADDRESS', 'option ignoreWarnings must be an array of warning codes'],
    [
      'an unknown code',
      ['TG_NO_ADDRESS'],
      `option ignoreWarnings: "TG_NO_ADDRESS" is not a warning code it emits; known codes are 'TG_UNTRUSTED_FORWARDED_FOR', `,
    ],
    ["a store's own code", ['TG_HYBRID_DEGRADED'], '"TG_HYBRID_DEGRADED" is not a warning code it emits'],
  ])('refuses %s, naming the option and the value', (_, ignoreWarnings, message) => {
    expect(configError(() => engine({ ignoreWarnings } as never, []))).toContain(message)
  })
})

describe('the codes ignoreWarnings takes', () => {
  /** Warnings that go to the `onWarning` of something else than a limiter or a middleware. */
  const ELSEWHERE = [
    'TG_HYBRID_DEGRADED',
    'TG_HYBRID_SYNC_SLOW',
    'TG_HYBRID_RECOVERED',
    'TG_FLEET_STATS_UNWRITTEN',
    'TG_RULES_UNREACHABLE',
    'TG_RULES_RECOVERED',
    'TG_RULES_REJECTED',
    'TG_RULES_SNAPSHOT',
    'TG_RULES_NUDGES_LOST',
    'TG_RULES_DIVERGED',
  ]

  it("are every warning docs/errors.md lists but a store's, a LiveRules' and shareFleetStats'", () => {
    const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8')
    const warnings = doc.slice(doc.indexOf('\n## Warnings'))
    const documented = [...warnings.matchAll(/^### (TG_[A-Z_]+)$/gm)].map(([, code]) => code)
    expect([...RATE_LIMIT_WARNING_CODES, ...ELSEWHERE].sort()).toEqual(documented.sort())
  })

  it("of a middleware are its own and its limiter's", () => {
    expect(RATE_LIMIT_WARNING_CODES).toEqual(expect.arrayContaining([...LIMITER_WARNING_CODES]))
    expect(new Set(RATE_LIMIT_WARNING_CODES).size).toBe(RATE_LIMIT_WARNING_CODES.length)
  })
})
