import { afterEach, describe, expect, it } from 'vitest'
import {
  createLimiter,
  createRateLimit,
  type Decision,
  type Limiter,
  type LimiterOptions,
  loadRules,
  MemoryStore,
  type RulesOptions,
  TollgateConfigError,
} from '../src/index.js'

const T = 1_763_712_000_000
const IP = 'ip:203.0.113.7'

const opened: Limiter[] = []

afterEach(async () => {
  await Promise.all(opened.splice(0).map((limiter) => limiter.close()))
})

function limiterWith(rules: RulesOptions, options: Partial<LimiterOptions> = {}): Limiter {
  const limiter = createLimiter({
    store: new MemoryStore({ clock: () => T, sweepIntervalMs: 0 }),
    rules,
    onWarning: () => {},
    ...options,
  })
  opened.push(limiter)
  return limiter
}

const TWO_PER_MINUTE = { windows: [{ limit: 2, period: '1m' }] } as const

/** Spends the rule's 2 units, then asks a third time. */
async function third(limiter: Limiter, rule: string, options?: { dryRun?: boolean }): Promise<Decision> {
  await limiter.consume(rule, IP)
  await limiter.consume(rule, IP)
  return limiter.consume(rule, IP, options)
}

function expectShadowed(decision: Decision, rule: string): void {
  expect(decision).toMatchObject({ allowed: true, reason: 'dry-run', rule, retryAfterMs: 0 })
  expect(decision.windows).toEqual([
    expect.objectContaining({ rule, identifier: IP, limit: 2, remaining: 0, failed: true }),
  ])
}

describe('a rule in dry run', () => {
  // Regression: dryRun was known only per call and per middleware (rule 'r': unknown option 'dryRun').
  it('allows what it would refuse, reason dry-run, retryAfterMs 0, the refusing window marked', async () => {
    const limiter = limiterWith({ shadowed: { ...TWO_PER_MINUTE, dryRun: true } })
    expectShadowed(await third(limiter, 'shadowed'), 'shadowed')
    expect(limiter.rules.get('shadowed')?.dryRun).toBe(true)
  })

  it('charges nothing for a shadowed refusal, and charges what it admits', async () => {
    const limiter = limiterWith({ shadowed: { windows: [{ limit: 2, period: '1m' }], dryRun: true } })
    await third(limiter, 'shadowed')
    expect((await limiter.peek('shadowed', IP)).windows[0]?.remaining).toBe(0)
    const other = 'ip:198.51.100.1'
    await limiter.consume('shadowed', other)
    expect((await limiter.peek('shadowed', other)).windows[0]?.remaining).toBe(1)
    // A cost no window can ever hold: refused by every window, charged to none.
    expect(await limiter.consume('shadowed', other, { cost: 5 })).toMatchObject({ reason: 'dry-run', retryAfterMs: 0 })
    expect((await limiter.peek('shadowed', other)).windows[0]?.remaining).toBe(1)
  })

  it('leaves the other rules of the limiter enforced', async () => {
    const limiter = limiterWith({ shadowed: { ...TWO_PER_MINUTE, dryRun: true }, enforced: TWO_PER_MINUTE })
    expect(await third(limiter, 'enforced')).toMatchObject({ allowed: false, reason: 'limited' })
    expect((await third(limiter, 'shadowed')).reason).toBe('dry-run')
  })

  it('is enforced by a call that asks dryRun: false', async () => {
    const limiter = limiterWith({ shadowed: { ...TWO_PER_MINUTE, dryRun: true } })
    const decision = await third(limiter, 'shadowed', { dryRun: false })
    expect(decision).toMatchObject({ allowed: false, reason: 'limited' })
    expect(decision.retryAfterMs).toBeGreaterThan(0)
  })

  it('does not change a refund', async () => {
    const limiter = limiterWith({ shadowed: { ...TWO_PER_MINUTE, dryRun: true } })
    await limiter.consume('shadowed', IP)
    expect(await limiter.refund('shadowed', IP)).toMatchObject({ allowed: true, reason: 'ok' })
  })

  it('takes in its decisions the windows of an enforced parent, which still refuses its own', async () => {
    const limiter = limiterWith({
      api: TWO_PER_MINUTE,
      'api.trial': { windows: [{ limit: 10, period: '1m' }], parent: 'api', dryRun: true },
    })
    await limiter.consume('api', IP)
    await limiter.consume('api', IP)
    const decision = await limiter.consume('api.trial', IP)
    expect(decision).toMatchObject({ allowed: true, reason: 'dry-run', retryAfterMs: 0 })
    expect(decision.windows.map((w) => [w.rule, w.failed])).toEqual([
      ['api.trial', false],
      ['api', true],
    ])
    expect((await limiter.consume('api', IP)).reason).toBe('limited')
  })

  it('cannot be the parent of a rule that refuses, whose decisions would enforce its windows', () => {
    const rules: RulesOptions = {
      api: { ...TWO_PER_MINUTE, dryRun: true },
      'api.write': { ...TWO_PER_MINUTE, parent: 'api' },
    }
    expect(() => limiterWith(rules)).toThrow(TollgateConfigError)
    expect(() => limiterWith(rules)).toThrow(
      "rule 'api.write' refuses, but its parent 'api' is in dry run: a decision of 'api.write' checks 'api''s windows too",
    )
    // Nor through the limiter's dryRun, which the parent takes and the child turns off.
    expect(() =>
      limiterWith({ api: TWO_PER_MINUTE, 'api.write': { ...rules['api.write']!, dryRun: false } }, { dryRun: true }),
    ).toThrow("rule 'api.write' refuses, but its parent 'api' is in dry run")
    limiterWith({ api: rules.api!, 'api.write': { ...rules['api.write']!, dryRun: true } })
  })

  it.each([
    ['"yes"', 'yes'],
    ['1', 1],
    ['null', null],
  ])('refuses dryRun %s, naming the rule', (shown, dryRun) => {
    const rules = { api: { ...TWO_PER_MINUTE, dryRun } } as unknown as RulesOptions
    expect(() => limiterWith(rules)).toThrow(`rule 'api': dryRun must be a boolean, got ${shown}`)
  })
})

describe('a limiter in dry run', () => {
  it('puts every rule in dry run', async () => {
    const limiter = limiterWith({ a: TWO_PER_MINUTE, b: TWO_PER_MINUTE }, { dryRun: true })
    expectShadowed(await third(limiter, 'a'), 'a')
    expectShadowed(await third(limiter, 'b'), 'b')
  })

  it('yields to a rule that sets dryRun: false, and to a call', async () => {
    const limiter = limiterWith({ a: TWO_PER_MINUTE, enforced: { ...TWO_PER_MINUTE, dryRun: false } }, { dryRun: true })
    expect((await third(limiter, 'enforced')).reason).toBe('limited')
    expect((await limiter.consume('a', IP, { dryRun: false })).reason).toBe('ok')
    expect((await limiter.consume('a', IP, { dryRun: false })).reason).toBe('ok')
    expect((await limiter.consume('a', IP, { dryRun: false })).reason).toBe('limited')
    expect((await limiter.consume('a', IP)).reason).toBe('dry-run')
  })

  it('lets a call put a rule of an enforcing limiter in dry run', async () => {
    const limiter = limiterWith({ a: TWO_PER_MINUTE })
    expectShadowed(await third(limiter, 'a', { dryRun: true }), 'a')
  })

  it.each([
    ['"yes"', 'yes'],
    ['null', null],
  ])('refuses dryRun %s', (shown, dryRun) => {
    expect(() => limiterWith({ a: TWO_PER_MINUTE }, { dryRun } as unknown as LimiterOptions)).toThrow(
      `createLimiter option dryRun must be a boolean, got ${shown}`,
    )
  })
})

describe('dryRun in a rules file', () => {
  it('is read as the rule option', async () => {
    const rules = loadRules(
      'limits:\n  - name: shadowed\n    dryRun: true\n    config: [{ limit: 2, period: 60 }]\n  - name: enforced\n    config: [{ limit: 2, period: 60 }]\n',
    )
    expect(rules.shadowed?.dryRun).toBe(true)
    expect(rules.enforced).not.toHaveProperty('dryRun')
    const limiter = limiterWith(rules)
    expectShadowed(await third(limiter, 'shadowed'), 'shadowed')
    expect((await third(limiter, 'enforced')).reason).toBe('limited')
  })

  it('is checked by createLimiter, naming the rule', () => {
    const rules = loadRules('limits:\n  - name: r\n    dryRun: maybe\n    config: [{ limit: 2, period: 60 }]\n')
    expect(() => limiterWith(rules)).toThrow(`rule 'r': dryRun must be a boolean, got "maybe"`)
  })

  it("is spelt dryRun, as in code: Envoy's shadow_mode is an unknown option that lists it", () => {
    expect(() =>
      loadRules('limits:\n  - name: r\n    shadow_mode: true\n    config: [{ limit: 2, period: 60 }]\n'),
    ).toThrow(/limits\[0\]: unknown option 'shadow_mode'; known options are .*'dryRun'/)
  })
})

describe('dryRun through the HTTP engine', () => {
  interface Req {
    path: string
  }
  const view = { ip: '203.0.113.7', forwardedFor: undefined, proxyTrusted: false }

  // Regression: the engine passed dryRun: false with every request unless told otherwise, which
  // would have enforced every rule in dry run.
  it("leaves a rule's dry run to the rule unless the middleware sets dryRun", async () => {
    const limiter = limiterWith({ shadowed: { windows: [{ limit: 1, period: '1m' }], dryRun: true } })
    const limited: Decision[] = []
    const follows = createRateLimit<Req>({ limiter, rule: 'shadowed', onLimited: (_, d) => void limited.push(d) })
    const enforces = createRateLimit<Req>({ limiter, rule: 'shadowed', dryRun: false })
    expect((await follows.check({ path: '/' }, view)).action).toBe('continue')
    const shadowed = await follows.check({ path: '/' }, view)
    expect(shadowed).toMatchObject({ action: 'continue', decision: { reason: 'dry-run' } })
    expect(limited.map((d) => d.reason)).toEqual(['dry-run'])
    expect(await enforces.check({ path: '/' }, view)).toMatchObject({ action: 'respond', status: 429 })
  })
})
