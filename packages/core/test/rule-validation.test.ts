import { describe, expect, it, vi } from 'vitest'
import {
  ALGORITHMS,
  createLimiter,
  createRateLimit,
  type Limiter,
  type LimiterOptions,
  loadRules,
  MAX_CHAIN_LENGTH,
  MAX_IDENTIFIERS,
  MAX_WINDOWS_PER_RULE,
  MemoryStore,
  type RuleOptions,
  type RulesOptions,
  type Store,
  type StoreRequest,
  type StoreResult,
  TollgateArgumentError,
  TollgateConfigError,
  TollgateError,
  type WindowOptions,
} from '../src/index.js'

const seed: RuleOptions = {
  windows: [
    { limit: 20, period: '60s' },
    { limit: 5, period: '3s' },
  ],
}

/** The seed rule's 60 s window, then `window` as window 1. */
function withWindow(window: unknown): RulesOptions {
  return { api: { windows: [{ limit: 20, period: '60s' }, window as WindowOptions] } }
}

function constructionError(options: unknown): TollgateConfigError {
  let limiter: ReturnType<typeof createLimiter> | undefined
  try {
    limiter = createLimiter(options as LimiterOptions)
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    expect(error).toHaveProperty('code', 'TG_CONFIG')
    return error as TollgateConfigError
  }
  void limiter.close()
  throw new Error(`createLimiter accepted ${JSON.stringify(options)}`)
}

function rulesError(rules: unknown): string {
  return constructionError({ rules, onWarning: () => {} }).message
}

function resultFor(request: StoreRequest): StoreResult {
  return {
    allowed: true,
    nowMs: 1_000,
    windows: request.targets.flatMap((target) =>
      target.windows.map((window) => ({ remaining: window.limit - request.cost, resetAtMs: 1_000, fitsAtMs: 1_000 })),
    ),
  }
}

function countingStore() {
  const calls = { evaluate: 0, reset: 0, close: 0 }
  const store: Store = {
    evaluate: async (request) => {
      calls.evaluate++
      return resultFor(request)
    },
    reset: async () => {
      calls.reset++
    },
    close: async () => {
      calls.close++
    },
  }
  return { store, calls }
}

function limiterOverCountingStore() {
  const { store, calls } = countingStore()
  // Any rule name, as from a variable: these tests ask for names the limiter does not hold.
  const limiter: Limiter = createLimiter({ store, rules: { api: seed } })
  return { limiter, calls }
}

async function rejection(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise
  } catch (error) {
    return error as Error & { code?: string }
  }
  throw new Error('the promise resolved')
}

describe('window limits', () => {
  it.each([
    ['0', 0, 'got 0'],
    ['-1', -1, 'got -1'],
    ['1.5', 1.5, 'got 1.5'],
    ['NaN', Number.NaN, 'got NaN'],
    ['Infinity', Number.POSITIVE_INFINITY, 'got Infinity'],
    ["'5'", '5', 'got "5"'],
    ['missing', undefined, 'got undefined'],
  ])('refuses limit %s, naming the rule, the window and the value', (_, limit, shown) => {
    const message = rulesError(withWindow({ limit, period: '3s' }))
    expect(message).toContain("rule 'api', window 1")
    expect(message).toContain('limit must be a positive integer')
    expect(message).toContain(shown)
  })

  it('refuses a window without a limit key at all', () => {
    expect(rulesError(withWindow({ period: '3s' }))).toContain("rule 'api', window 1: limit must be a positive integer")
  })
})

describe('window periods', () => {
  it.each([
    ['0', 0, 'period 0 must be a positive duration'],
    ['-5', -5, 'period -5 must be a positive duration'],
    ["'abc'", 'abc', 'period "abc" is not a duration'],
    ["'3 weeks'", '3 weeks', 'period "3 weeks" is not a duration'],
    ['1.5 (not whole milliseconds)', 1.5, 'period 1.5 is not a whole number of milliseconds'],
    ["'0.5ms'", '0.5ms', 'period "0.5ms" is not a whole number of milliseconds'],
    ['missing', undefined, 'period undefined is not a duration'],
    ['NaN', Number.NaN, 'period NaN must be a positive duration'],
    ["'367d'", '367d', 'period "367d" is longer than the maximum of 366 days'],
    ['366 days + 1 ms', 366 * 86_400_000 + 1, 'period 31622400001 is longer than the maximum of 366 days'],
  ])('refuses period %s, naming the rule, the window and the value', (_, period, shown) => {
    const message = rulesError(withWindow({ limit: 5, period }))
    expect(message).toContain("rule 'api', window 1: ")
    expect(message).toContain(shown)
  })

  it('accepts a period of exactly 366 days', () => {
    const limiter = createLimiter({
      rules: { year: { windows: [{ limit: 1, period: '366d' }] } },
      store: countingStore().store,
    })
    expect(limiter.rules.get('year')?.windows).toEqual([{ limit: 1, periodMs: 366 * 86_400_000 }])
  })

  it('refuses two windows of the same period however they are spelled', () => {
    const message = rulesError({
      api: {
        windows: [
          { limit: 20, period: '60s' },
          { limit: 5, period: 60_000 },
        ],
      },
    })
    expect(message).toContain("rule 'api', window 1: period 60000 ms repeats window 0's")
  })
})

describe('rules', () => {
  it('refuses an unknown algorithm', () => {
    const message = rulesError({ api: { ...seed, algorithm: 'leaky-bucket' } })
    expect(message).toContain('rule \'api\': unknown algorithm "leaky-bucket"')
    expect(message).toContain("'token-bucket'")
  })

  it('refuses an unknown parent', () => {
    expect(rulesError({ api: { ...seed, parent: 'nope' } })).toContain("rule 'api': unknown parent 'nope'")
  })

  it('names the rule whose parent is unknown, even further up a chain', () => {
    const message = rulesError({ a: { ...seed, parent: 'b' }, b: { ...seed, parent: 'nope' } })
    expect(message).toContain("rule 'b': unknown parent 'nope'")
  })

  it('refuses an empty parent name', () => {
    expect(rulesError({ api: { ...seed, parent: '' } })).toContain('rule \'api\': parent must be a rule name, got ""')
  })

  it('refuses a parent cycle a → b → a', () => {
    const message = rulesError({ a: { ...seed, parent: 'b' }, b: { ...seed, parent: 'a' } })
    expect(message).toContain("rule 'a': parent cycle 'a' → 'b' → 'a'")
  })

  it('refuses a rule that is its own parent', () => {
    expect(rulesError({ a: { ...seed, parent: 'a' } })).toContain("rule 'a': parent cycle 'a' → 'a'")
  })

  function chainOf(length: number): Record<string, RuleOptions> {
    const rules: Record<string, RuleOptions> = {}
    for (let i = 0; i < length; i++) {
      rules[`r${i}`] = {
        windows: [{ limit: 10, period: '1s' }],
        ...(i + 1 < length ? { parent: `r${i + 1}` } : {}),
      }
    }
    return rules
  }

  it(`accepts a parent chain of exactly MAX_CHAIN_LENGTH (${MAX_CHAIN_LENGTH}) rules`, () => {
    const limiter = createLimiter({ rules: chainOf(MAX_CHAIN_LENGTH), store: countingStore().store })
    expect(limiter.rules.get('r0')?.chain.map((rule) => rule.name)).toEqual(
      Array.from({ length: MAX_CHAIN_LENGTH }, (_, i) => `r${i}`),
    )
  })

  it('refuses a parent chain longer than MAX_CHAIN_LENGTH', () => {
    const message = rulesError(chainOf(MAX_CHAIN_LENGTH + 1))
    expect(message).toContain("rule 'r0': its parent chain 'r0' → 'r1'")
    expect(message).toContain(`longer than the maximum of ${MAX_CHAIN_LENGTH} rules`)
  })

  function windowsOf(count: number): WindowOptions[] {
    return Array.from({ length: count }, (_, i) => ({ limit: 1_000 * (i + 1), period: `${i + 1}h` }))
  }

  it(`accepts exactly MAX_WINDOWS_PER_RULE (${MAX_WINDOWS_PER_RULE}) windows`, () => {
    const limiter = createLimiter({
      rules: { api: { windows: windowsOf(MAX_WINDOWS_PER_RULE) } },
      store: countingStore().store,
      onWarning: () => {},
    })
    expect(limiter.rules.get('api')?.windows).toHaveLength(MAX_WINDOWS_PER_RULE)
  })

  it('refuses more than MAX_WINDOWS_PER_RULE windows', () => {
    const message = rulesError({ api: { windows: windowsOf(MAX_WINDOWS_PER_RULE + 1) } })
    expect(message).toContain(
      `rule 'api': ${MAX_WINDOWS_PER_RULE + 1} windows is more than the maximum of ${MAX_WINDOWS_PER_RULE}`,
    )
  })

  it.each([
    ['empty', []],
    ['not an array', { limit: 5, period: '3s' }],
    ['missing', undefined],
  ])('refuses windows that are %s', (_, windows) => {
    expect(rulesError({ api: { windows } })).toContain("rule 'api': windows must be a non-empty array")
  })

  it('refuses a window that is not an object', () => {
    expect(rulesError(withWindow(5))).toContain("rule 'api', window 1 must be an object { limit, period }, got 5")
  })

  it('refuses a rule that is not an object', () => {
    expect(rulesError({ api: [seed] })).toContain("rule 'api' must be an object with windows")
  })

  it('refuses an empty rule name', () => {
    expect(rulesError({ '': seed })).toContain('a rule name must not be empty')
  })

  // Regression: a 20,000-character rule name made every response's headers larger than Node's
  // HTTP client accepts.
  it('refuses a rule name longer than 128 characters, naming its start and its length', () => {
    const message = rulesError({ [`api.${'x'.repeat(19_996)}`]: seed })
    expect(message).toContain('"api.xxxx')
    expect(message).toContain('20000 characters')
    expect(message).toContain('at most 128')
    expect(message.length).toBeLessThan(300)
    expect(() => createLimiter({ rules: { ['r'.repeat(128)]: seed } })).not.toThrow()
  })

  it('refuses empty rules', () => {
    expect(rulesError({})).toContain('option rules must hold at least one rule')
  })

  it.each([
    ['an array', [seed], '[{"windows"'],
    ['a string', 'api', '"api"'],
    ['null', null, 'null'],
    ['missing', undefined, 'undefined'],
    ['a Map', new Map([['api', seed]]), '{}'],
  ])('refuses rules that are %s', (_, rules, shown) => {
    const message = rulesError(rules)
    expect(message).toContain('option rules must be an object mapping rule names to rules')
    expect(message).toContain(`got ${shown}`)
  })
})

describe('unknown option keys', () => {
  it('are refused at the top level', () => {
    const message = constructionError({ rules: { api: seed }, stroe: {} }).message
    expect(message).toContain("createLimiter options: unknown option 'stroe'")
    expect(message).toContain("'store'")
  })

  it('are refused in a rule', () => {
    expect(rulesError({ api: { ...seed, algoritm: 'gcra' } })).toContain("rule 'api': unknown option 'algoritm'")
  })

  it('are refused in a window', () => {
    expect(rulesError(withWindow({ limit: 5, period: '3s', burst: 2 }))).toContain(
      "rule 'api', window 1: unknown option 'burst'",
    )
  })

  it('refuses an onWarning that is not a function', () => {
    expect(constructionError({ rules: { api: seed }, onWarning: 'log' }).message).toContain(
      'option onWarning must be a function, got "log"',
    )
  })

  it('refuses a store that is not a Store', () => {
    expect(constructionError({ rules: { api: seed }, store: { get: () => 1 } }).message).toContain(
      'option store must be a Store',
    )
  })

  it('refuses options that are not an object', () => {
    expect(constructionError(undefined).message).toContain('createLimiter options must be an object { rules }')
  })
})

describe('large quotas', () => {
  // Byte quotas: 1 GB per day, 10 GB per hour, 100 GB per 30 days, and the extremes.
  const quotas = [
    [1e9, '1d'],
    [1e10, '1h'],
    [1e11, '30d'],
    [Number.MAX_SAFE_INTEGER, 1],
    [Number.MAX_SAFE_INTEGER, '366d'],
  ] as const

  it.each(ALGORITHMS)(
    'were refused for %s once limit × period passed 2^53; any limit up to 2^53 − 1 per up to 366 days is accepted',
    (algorithm) => {
      for (const [limit, period] of quotas) {
        const limiter = createLimiter({
          rules: { api: { algorithm, windows: [{ limit, period }] } },
          onWarning: () => {},
        })
        expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(limit)
        void limiter.close()
      }
    },
  )

  it('refuses a limit above 2^53 − 1, naming it', () => {
    expect(rulesError({ api: { windows: [{ limit: 2 ** 53, period: '1d' }] } })).toContain(
      "rule 'api', window 0: limit must be a positive integer, got 9007199254740992",
    )
  })

  it.each(['token-bucket', 'gcra'] as const)(
    '%s admits the whole limit of 2^40 per minute at once, then one token per refill',
    async (algorithm) => {
      const huge = 2 ** 40
      let now = 1_000_000
      const limiter = createLimiter({
        store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
        rules: { api: { algorithm, windows: [{ limit: huge, period: '60s' }] } },
      })
      expect((await limiter.consume('api', 'a', { cost: huge })).allowed).toBe(true)
      const refused = await limiter.consume('api', 'a')
      expect(refused.allowed).toBe(false)
      expect(refused.retryAfterMs).toBe(1)
      now += 1
      expect((await limiter.consume('api', 'a')).allowed).toBe(true)
      await limiter.close()
    },
  )
})

describe('warnings', () => {
  function warningsFor(rules: RulesOptions): Array<{ message: string; code: string }> {
    const warnings: Array<{ message: string; code: string }> = []
    createLimiter({
      rules,
      store: countingStore().store,
      onWarning: (message, code) => warnings.push({ message, code }),
    })
    return warnings
  }

  it('warns about 600 per 600 s beside 10 per 10 s', () => {
    const warnings = warningsFor({
      api: {
        windows: [
          { limit: 10, period: '10s' },
          { limit: 600, period: '600s' },
        ],
      },
    })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.code).toBe('TG_WINDOW_NEVER_BINDS')
    expect(warnings[0]?.message).toContain("rule 'api': window 600 per 600000 ms can never bind beside 10 per 10000 ms")
  })

  it('warns about a shorter window whose limit reaches the longer one’s (30 per 3 s beside 20 per 60 s)', () => {
    const warnings = warningsFor({
      api: {
        windows: [
          { limit: 20, period: '60s' },
          { limit: 30, period: '3s' },
        ],
      },
    })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.code).toBe('TG_WINDOW_NEVER_BINDS')
    expect(warnings[0]?.message).toContain("rule 'api': window 30 per 3000 ms can never bind beside 20 per 60000 ms")
  })

  it('does not warn about the seed rule 20 per 60 s + 5 per 3 s', () => {
    expect(warningsFor({ api: seed })).toEqual([])
  })

  it('does not warn about a rule with one window', () => {
    expect(warningsFor({ api: { windows: [{ limit: 1, period: '1ms' }] } })).toEqual([])
  })

  // Regression: `period: 60` in code is 60 ms (in a rules file, 60 s), and nothing said so.
  it.each([1, 60, 500, 999])('warns about a period of %d given as a bare number, under a second', (period) => {
    const warnings = warningsFor({ api: { windows: [{ limit: 5, period }] } })
    expect(warnings).toEqual([
      {
        code: 'TG_PERIOD_IN_MS',
        message: `rule 'api', window 0: period ${period} is ${period} milliseconds (in code a number is milliseconds; in a rules file, seconds); write '${period}ms' to mean it, or '${period}s' for seconds`,
      },
    ])
  })

  it.each<[string, WindowOptions['period']]>([
    ['a second as a number', 1_000],
    ['a minute as a number', 60_000],
    ["'60ms'", '60ms'],
    ["'500 milliseconds'", '500 milliseconds'],
  ])('does not warn about a period of %s', (_, period) => {
    expect(warningsFor({ api: { windows: [{ limit: 5, period }] } })).toEqual([])
  })

  it('does not warn about sub-second periods read from a rules file, whose numbers are seconds', () => {
    const rules = loadRules(
      'limits:\n  - name: api\n    config: [{ limit: 5, period: 0.5 }, { limit: 8, period: 0.999 }]\n',
    )
    expect(warningsFor(rules)).toEqual([])
  })

  it('warns about a bare-number period of inline windows in the HTTP engine', () => {
    const warnings: string[] = []
    createRateLimit({ windows: [{ limit: 5, period: 60 }], onWarning: (_, code) => warnings.push(code) })
    expect(warnings).toEqual(['TG_PERIOD_IN_MS'])
  })

  it('sends warnings to process.emitWarning by default', async () => {
    const warned = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve))
    const limiter = createLimiter({
      store: countingStore().store,
      rules: {
        api: {
          windows: [
            { limit: 10, period: '10s' },
            { limit: 600, period: '600s' },
          ],
        },
      },
    })
    const warning = await warned
    expect(warning.code).toBe('TG_WINDOW_NEVER_BINDS')
    expect(warning.message).toContain("rule 'api': window 600 per 600000 ms can never bind")
    await limiter.close()
  })

  const fixedWindows: RulesOptions = {
    api: {
      algorithm: 'fixed-window',
      windows: [
        { limit: 10, period: '7s' },
        { limit: 20, period: '10s' },
      ],
    },
  }

  it('fixed-window 20 per 10 s does bind beside 10 per 7 s: epoch-aligned windows straddle each other', async () => {
    let now = 20_000
    const limiter = createLimiter({
      store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
      rules: fixedWindows,
      onWarning: () => {},
    })
    expect((await limiter.consume('api', 'a', { cost: 10 })).allowed).toBe(true)
    now = 21_000
    expect((await limiter.consume('api', 'a', { cost: 10 })).allowed).toBe(true)
    now = 28_000
    const decision = await limiter.consume('api', 'a')
    expect(decision.allowed).toBe(false)
    expect(decision.windows.filter((window) => window.failed).map((window) => window.periodMs)).toEqual([10_000])
    await limiter.close()
  })

  // Regression: the sliding bound short.limit × ceil(long / short) was applied to epoch-aligned
  // fixed windows, where one 10 s window can overlap three 7 s windows (see the test above).
  it('does not claim that fixed-window 20 per 10 s never binds beside 10 per 7 s', () => {
    expect(warningsFor(fixedWindows)).toEqual([])
  })
})

describe('decision arguments are refused before any I/O', () => {
  it('a valid decision reaches the store (so the counts below mean something)', async () => {
    const { limiter, calls } = limiterOverCountingStore()
    await limiter.consume('api', 'a')
    await limiter.reset('api', 'a')
    expect(calls).toEqual({ evaluate: 1, reset: 1, close: 0 })
  })

  it.each([
    ['NaN', Number.NaN, 'NaN'],
    ['-1', -1, '-1'],
    ['1.5', 1.5, '1.5'],
    ['Infinity', Number.POSITIVE_INFINITY, 'Infinity'],
    ["'1'", '1', '"1"'],
    ['null', null, 'null'],
  ])('cost %s', async (_, cost, shown) => {
    const { limiter, calls } = limiterOverCountingStore()
    for (const operation of ['consume', 'peek', 'refund'] as const) {
      const error = await rejection(limiter[operation]('api', 'a', { cost: cost as number }))
      expect(error).toBeInstanceOf(TollgateArgumentError)
      expect(error).toBeInstanceOf(TypeError)
      expect(error.code).toBe('TG_INVALID_ARGUMENT')
      expect(error.message).toContain(`cost must be a non-negative integer, got ${shown}`)
    }
    expect(calls.evaluate).toBe(0)
  })

  it('cost 0 is accepted', async () => {
    const { limiter, calls } = limiterOverCountingStore()
    await expect(limiter.consume('api', 'a', { cost: 0 })).resolves.toMatchObject({ allowed: true, cost: 0 })
    expect(calls.evaluate).toBe(1)
  })

  it.each([
    ['[]', [], 'identifiers must be a non-empty string or array of strings, got []'],
    ["''", '', 'an identifier must be a non-empty string, got ""'],
    ["['']", [''], 'an identifier must be a non-empty string, got ""'],
    [
      `${MAX_IDENTIFIERS + 1} identifiers`,
      Array.from({ length: MAX_IDENTIFIERS + 1 }, (_, i) => `id-${i}`),
      `at most ${MAX_IDENTIFIERS} identifiers, got ${MAX_IDENTIFIERS + 1}`,
    ],
    ["['a', 'a']", ['a', 'a'], 'identifier "a" is given twice'],
    ['[1]', [1], 'an identifier must be a non-empty string, got 1'],
    ['null', null, 'got null'],
    ['a 16,385-character identifier', 'x'.repeat(16_385), 'at most 16384 characters, got one of 16385'],
  ])('identifiers %s', async (_, identifiers, shown) => {
    const { limiter, calls } = limiterOverCountingStore()
    for (const operation of ['consume', 'peek', 'refund', 'reset'] as const) {
      const error = await rejection(limiter[operation]('api', identifiers as string[]))
      expect(error).toBeInstanceOf(TollgateArgumentError)
      expect(error.code).toBe('TG_INVALID_ARGUMENT')
      expect(error.message).toContain(shown)
    }
    expect(calls).toEqual({ evaluate: 0, reset: 0, close: 0 })
  })

  it(`accepts ${MAX_IDENTIFIERS} identifiers and a 16,384-character identifier`, async () => {
    const { limiter, calls } = limiterOverCountingStore()
    const many = Array.from({ length: MAX_IDENTIFIERS }, (_, i) => `id-${i}`)
    expect((await limiter.consume('api', many)).windows).toHaveLength(2 * MAX_IDENTIFIERS)
    await limiter.consume('api', 'x'.repeat(16_384))
    expect(calls.evaluate).toBe(2)
  })

  it('an unknown rule', async () => {
    const { limiter, calls } = limiterOverCountingStore()
    for (const operation of ['consume', 'peek', 'refund', 'reset'] as const) {
      const error = await rejection(limiter[operation]('apj', 'a'))
      expect(error).toBeInstanceOf(TollgateError)
      expect(error.code).toBe('TG_UNKNOWN_RULE')
      expect(error.message).toContain('unknown rule "apj"; the limiter holds \'api\'')
    }
    expect(calls).toEqual({ evaluate: 0, reset: 0, close: 0 })
  })

  it('an unknown decision option', async () => {
    const { limiter, calls } = limiterOverCountingStore()
    const error = await rejection(limiter.consume('api', 'a', { costs: 1 } as never))
    expect(error).toBeInstanceOf(TollgateArgumentError)
    expect(error.message).toContain("decision options: unknown option 'costs'; known options are 'cost', 'dryRun'")
    expect(calls.evaluate).toBe(0)
  })

  it('decision options that are not an object', async () => {
    const { limiter, calls } = limiterOverCountingStore()
    const error = await rejection(limiter.consume('api', 'a', 2 as never))
    expect(error).toBeInstanceOf(TollgateArgumentError)
    expect(error.message).toContain('decision options must be an object { cost }, got 2')
    expect(calls.evaluate).toBe(0)
  })
})

describe('reset options are refused before any I/O', () => {
  it.each([
    ['an unknown key', { parent: true }, "reset options: unknown option 'parent'; known options are 'parents'"],
    ['parents 1', { parents: 1 }, 'reset option parents must be a boolean, got 1'],
    ["parents 'yes'", { parents: 'yes' }, 'reset option parents must be a boolean, got "yes"'],
    ['options true', true, 'reset options must be an object { parents }, got true'],
    ['options null', null, 'reset options must be an object { parents }, got null'],
  ])('%s', async (_, options, shown) => {
    const { limiter, calls } = limiterOverCountingStore()
    const error = await rejection(limiter.reset('api', 'a', options as never))
    expect(error).toBeInstanceOf(TollgateArgumentError)
    expect(error.code).toBe('TG_INVALID_ARGUMENT')
    expect(error.message).toContain(shown)
    expect(calls.reset).toBe(0)
  })

  it.each([undefined, {}, { parents: false }, { parents: true }])('accepts %j', async (options) => {
    const { limiter, calls } = limiterOverCountingStore()
    await limiter.reset('api', 'a', options)
    expect(calls.reset).toBe(1)
  })
})

describe('close()', () => {
  it('refuses every call afterwards with TG_CLOSED and closes the store once', async () => {
    const { limiter, calls } = limiterOverCountingStore()
    await limiter.close()
    await limiter.close()
    for (const operation of ['consume', 'peek', 'refund', 'reset'] as const) {
      const error = await rejection(limiter[operation]('api', 'a'))
      expect(error).toBeInstanceOf(TollgateError)
      expect(error.code).toBe('TG_CLOSED')
    }
    expect(calls).toEqual({ evaluate: 0, reset: 0, close: 1 })
  })

  it('waits for a decision in flight, then closes the store once', async () => {
    const calls = { evaluate: 0, close: 0 }
    let release: (() => void) | undefined
    const store: Store = {
      evaluate(request) {
        calls.evaluate++
        return new Promise((resolve) => {
          release = () => resolve(resultFor(request))
        })
      },
      reset: async () => {},
      close: async () => {
        calls.close++
      },
    }
    const limiter = createLimiter({ store, rules: { api: seed } })
    const decision = limiter.consume('api', 'a')
    expect(calls.evaluate).toBe(1)

    let closed = false
    const closing = limiter.close().then(() => {
      closed = true
    })
    const second = limiter.close()
    for (let i = 0; i < 10; i++) await Promise.resolve()
    expect(closed).toBe(false)
    expect(calls.close).toBe(0)
    expect((await rejection(limiter.consume('api', 'b'))).code).toBe('TG_CLOSED')

    release?.()
    await closing
    await second
    expect(closed).toBe(true)
    expect(calls.close).toBe(1)
    await expect(decision).resolves.toMatchObject({ allowed: true, rule: 'api' })
  })
})

describe('construction failures', () => {
  // Regression: the default MemoryStore (and its sweep interval) was built before the rules were
  // checked, so every config error left an interval behind.
  it('leave no sweep timer running', () => {
    const started = vi.spyOn(globalThis, 'setInterval')
    const cleared = vi.spyOn(globalThis, 'clearInterval')
    try {
      expect(() => createLimiter({ rules: {} })).toThrow(TollgateConfigError)
      const timers = started.mock.results.map((result) => result.value)
      const clearedTimers = cleared.mock.calls.map(([timer]) => timer)
      for (const timer of timers) clearInterval(timer)
      expect(timers.filter((timer) => !clearedTimers.includes(timer))).toEqual([])
    } finally {
      started.mockRestore()
      cleared.mockRestore()
    }
  })
})
