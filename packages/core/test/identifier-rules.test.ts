import { describe, expect, it } from 'vitest'
import {
  createLimiter,
  type LimiterOptions,
  loadRules,
  MemoryStore,
  type RulesOptions,
  TollgateConfigError,
} from '../src/index.js'
import { IdentifierOverrides } from '../src/rules/identifier-overrides.js'

function constructionError(rules: unknown): TollgateConfigError {
  try {
    createLimiter({ rules } as LimiterOptions).close()
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    return error as TollgateConfigError
  }
  throw new Error('createLimiter accepted the rules')
}

const windows = [{ limit: 2, period: '1m' }] as const

describe('the rule option by', () => {
  it.each([
    ['user', "rule 'r': by must be an array of identifier kinds", 'user'],
    [['user', 'user'], "rule 'r': by names 'user' twice"],
    [['user:'], "rule 'r': by[0] must be an identifier kind", 'got "user:"'],
    [[''], "rule 'r': by[0] must be an identifier kind", 'got ""'],
    [[42], "rule 'r': by[0] must be an identifier kind", '42'],
  ])('refuses %j, naming the rule and the value', (by, message, value = '') => {
    const error = constructionError({ r: { windows, by } })
    expect(error.message).toContain(message)
    expect(error.message).toContain(value)
  })

  it('is kept on the resolved rule, frozen', () => {
    const limiter = createLimiter({ rules: { r: { windows, by: ['user', 'org'] }, g: { windows, by: [] } } })
    expect(limiter.rules.get('r')?.by).toEqual(['user', 'org'])
    expect(Object.isFrozen(limiter.rules.get('r')?.by)).toBe(true)
    expect(limiter.rules.get('g')?.by).toEqual([])
  })

  it('charges a rule of several kinds on each identifier of any of them, and no other', async () => {
    const limiter = createLimiter({ rules: { r: { windows, by: ['user', 'org'] } } })
    const decision = await limiter.consume('r', ['ip:203.0.113.7', 'user:1', 'org:acme', 'session:9'])
    expect(decision.windows.map((w) => w.identifier)).toEqual(['user:1', 'org:acme'])
    await limiter.close()
  })

  it('takes an identifier without a kind (no colon) as one no by names', async () => {
    const limiter = createLimiter({ rules: { r: { windows, by: ['user'] } } })
    await expect(limiter.consume('r', 'user')).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
    await limiter.close()
  })
})

describe('the rule option overrides', () => {
  it.each([
    [[], "rule 'r': overrides must be an object mapping identifiers or patterns to { windows }"],
    [{ 'org:a': [] }, "rule 'r', override 'org:a' must be an object { windows }, got []"],
    [{ 'org:a': { windows: [] } }, "rule 'r', override 'org:a': windows must be a non-empty array"],
    [{ 'org:a': { windows: [{ limit: 0, period: '1m' }] } }, "rule 'r', override 'org:a', window 0: limit"],
    [{ 'org:a': { windows, limit: 3 } }, "rule 'r', override 'org:a'"],
    [{ '*': { windows } }, "override '*' matches every identifier"],
    [{ '': { windows } }, "an override's key must be an identifier or pattern of 1 to 1024 characters"],
  ])('refuses %j, naming the rule, the override and the value', (overrides, message) => {
    expect(constructionError({ r: { windows, overrides } }).message).toContain(message)
  })

  it('refuses more patterns than a decision should try in turn', () => {
    const overrides = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`user:${i}*`, { windows }]))
    expect(constructionError({ r: { windows, overrides } }).message).toContain(
      '65 override patterns is more than the maximum of 64',
    )
  })

  it('warns of an override window that never binds, naming the override', () => {
    const warnings: string[] = []
    createLimiter({
      rules: {
        r: {
          windows,
          overrides: {
            'org:a': {
              windows: [
                { limit: 5, period: '1s' },
                { limit: 500, period: '1m' },
              ],
            },
          },
        },
      },
      onWarning: (message) => warnings.push(message),
    }).close()
    expect(warnings).toEqual([
      expect.stringContaining("rule 'r', override 'org:a': window 500 per 60000 ms can never bind"),
    ])
  })

  it('matches exact keys first, then the pattern with most characters besides *, then the first listed', () => {
    const overrides = IdentifierOverrides.of(
      {
        'user:*': { windows: [{ limit: 1, period: 1_000 }] },
        'user:*-test': { windows: [{ limit: 2, period: 1_000 }] },
        '*-test': { windows: [{ limit: 3, period: 1_000 }] },
        'user:a*': { windows: [{ limit: 4, period: 1_000 }] },
        'user:*b': { windows: [{ limit: 5, period: 1_000 }] },
        'user:a-test': { windows: [{ limit: 6, period: 1_000 }] },
        'org:*:*:x': { windows: [{ limit: 7, period: 1_000 }] },
      },
      { name: 'r', algorithm: 'fixed-window', where: "rule 'r'" },
      () => {},
    )
    const limitOf = (id: string) => overrides.of(id)?.windows[0]?.limit
    expect(limitOf('user:a-test')).toBe(6)
    expect(limitOf('user:z-test')).toBe(2)
    expect(limitOf('bot-test')).toBe(3)
    expect(limitOf('user:ab')).toBe(4)
    expect(limitOf('user:zb')).toBe(5)
    expect(limitOf('user:z')).toBe(1)
    expect(limitOf('org:1:2:x')).toBe(7)
    expect(limitOf('org:1:x')).toBeUndefined()
    expect(limitOf('org:x')).toBeUndefined()
    expect(limitOf('ip:1')).toBeUndefined()
  })

  it('matches a pattern in time linear in the identifier, whatever its stars', () => {
    const overrides = IdentifierOverrides.of(
      { 'a*a*a*a*a*a*a*a*b': { windows } },
      { name: 'r', algorithm: 'fixed-window', where: "rule 'r'" },
      () => {},
    )
    // A backtracking regular expression takes minutes on this; the parts matched in turn, a scan.
    expect(overrides.of('a'.repeat(16_000))).toBeUndefined()
    expect(overrides.of(`${'a'.repeat(16_000)}b`)).toBeDefined()
  })

  it('shares one windows list and state among overrides of the same windows, another for other periods', () => {
    const limiter = createLimiter({
      rules: {
        r: {
          algorithm: 'fixed-window',
          windows,
          overrides: {
            'org:a': { windows: [{ limit: 9, period: '1m' }] },
            'org:b': { windows: [{ limit: 9, period: '1m' }] },
            'org:c': { windows: [{ limit: 9, period: '1h' }] },
          },
        },
      },
    })
    const rule = limiter.rules.get('r')
    const [a, b, c] = rule?.overrides?.list ?? []
    expect(a?.windows).toBe(b?.windows)
    // A counter's limit is not part of its state's shape: moved to another limit, counts stay.
    expect(a?.stateName).toBe(rule?.stateName)
    expect(c?.stateName).not.toBe(rule?.stateName)
    limiter.close()
  })

  it('answers with the override windows in headers-ready decisions and charges them on a memory store', async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      rules: { r: { windows, overrides: { 'org:acme': { windows: [{ limit: 5, period: '10s' }] } } } },
    })
    const decision = await limiter.consume('r', 'org:acme')
    expect(decision.windows.map((w) => [w.limit, w.periodMs, w.remaining])).toEqual([[5, 10_000, 4]])
    await limiter.close()
  })
})

describe('rules files', () => {
  it('read by and overrides, override periods in seconds as the rule', () => {
    const rules = loadRules(`
limits:
  - name: user
    by: [user]
    parent: org
    config:
      - { limit: 3, period: 60 }
  - name: org
    by: [org]
    config:
      - { limit: 5, period: 60 }
    overrides:
      'org:acme': { config: [{ limit: 50, period: 60 }, { limit: 5, period: 1 }] }
      'org:*-test': { config: [{ limit: 1, period: '1 minute' }] }
`)
    expect(rules).toEqual({
      user: { windows: [{ limit: 3, period: '60s' }], by: ['user'], parent: 'org' },
      org: {
        windows: [{ limit: 5, period: '60s' }],
        by: ['org'],
        overrides: {
          'org:acme': {
            windows: [
              { limit: 50, period: '60s' },
              { limit: 5, period: '1s' },
            ],
          },
          'org:*-test': { windows: [{ limit: 1, period: '1 minute' }] },
        },
      },
    } satisfies RulesOptions)
    expect(() => createLimiter({ rules }).close()).not.toThrow()
  })

  it('refuse an override without config, naming the rule and the override', () => {
    expect(() =>
      loadRules(
        "limits:\n  - name: org\n    config: [{ limit: 1, period: 1 }]\n    overrides:\n      'org:a': { windows: [] }\n",
      ),
    ).toThrow("rules text: limits[0] ('org'), overrides['org:a']")
  })
})
