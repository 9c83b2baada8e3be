import { afterEach, describe, expect, it } from 'vitest'
import { createRateLimit, type RateLimit } from '../src/http/rate-limit.js'
import { createRouteRateLimit } from '../src/http/route-rate-limit.js'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import type { LimiterOptions } from '../src/limiter/limiter-config.js'
import type { RuleOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store } from '../src/stores/store.js'

const opened: Array<Limiter | RateLimit<unknown> | MemoryStore> = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((closable) => closable.close()))
})

function memoryStore(): MemoryStore {
  const store = new MemoryStore({ sweepIntervalMs: 0 })
  opened.push(store)
  return store
}

/** A limiter holding one rule, `api`, and the codes of the warnings it gave. */
function limiterWith(store: Store | undefined, api: RuleOptions, options: Partial<LimiterOptions> = {}) {
  const warnings: Array<{ message: string; code: string }> = []
  const limiter = createLimiter({
    ...(store ? { store } : {}),
    rules: { api },
    onWarning: (message, code) => warnings.push({ message, code }),
    ...options,
  })
  opened.push(limiter)
  return { limiter, warnings }
}

const PER_MINUTE = (limit: number): RuleOptions => ({ windows: [{ limit, period: '1m' }] })

describe('a rule of one name, algorithm and periods with other limits, on one store', () => {
  it('warns the limiter made second, naming the rule and both limits', () => {
    const store = memoryStore()
    const first = limiterWith(store, PER_MINUTE(100))
    const second = limiterWith(store, PER_MINUTE(10))
    expect(first.warnings).toEqual([])
    expect(second.warnings).toEqual([
      {
        code: 'TG_RULE_NAME_CLASH',
        message: expect.stringContaining(
          "rule 'api' counts 10/1m here and 100/1m in another limiter on the same store",
        ),
      },
    ])
    expect(second.warnings[0]?.message).toContain('another name')
  })

  it('warns once of a rule whatever the number of limiters it clashes with, and of each rule that clashes', () => {
    const store = memoryStore()
    limiterWith(store, PER_MINUTE(100))
    limiterWith(store, PER_MINUTE(50))
    const warnings: string[] = []
    createLimiter({
      store,
      rules: { api: PER_MINUTE(10), other: PER_MINUTE(1) },
      onWarning: (message) => warnings.push(message),
    })
    expect(warnings).toEqual([expect.stringContaining("rule 'api' counts 10/1m here and 100/1m")])
  })

  it("warns a limiter made on another's store (limiter.store)", () => {
    const first = limiterWith(undefined, PER_MINUTE(100))
    expect(limiterWith(first.limiter.store, PER_MINUTE(10)).warnings.map(({ code }) => code)).toEqual([
      'TG_RULE_NAME_CLASH',
    ])
  })

  it("warns a route's own rule of the app's name, counted on the app's store", () => {
    const store = memoryStore()
    const warnings: string[] = []
    const app = createRateLimit<unknown>({
      store,
      rules: { api: PER_MINUTE(100) },
      rule: 'api',
      onWarning: (_message, code) => warnings.push(code),
    })
    opened.push(app)
    opened.push(createRouteRateLimit(app, { rule: 'api', windows: [{ limit: 10, period: '1m' }] }, 'POST /upload'))
    expect(warnings).toEqual(['TG_RULE_NAME_CLASH'])
  })

  it('is left out by ignoreWarnings naming its code', () => {
    const store = memoryStore()
    limiterWith(store, PER_MINUTE(100))
    expect(limiterWith(store, PER_MINUTE(10), { ignoreWarnings: ['TG_RULE_NAME_CLASH'] }).warnings).toEqual([])
  })
})

describe('rules that share no state, or share it with the same limits, never warn', () => {
  it.each<[string, RuleOptions, RuleOptions]>([
    ['the same limits', PER_MINUTE(100), PER_MINUTE(100)],
    ['other periods: their own keys', PER_MINUTE(100), { windows: [{ limit: 100, period: '1h' }] }],
    ['another algorithm: its own keys', PER_MINUTE(100), { algorithm: 'fixed-window', ...PER_MINUTE(10) }],
    [
      "buckets of other limits: a bucket's limits are its keys",
      { algorithm: 'token-bucket', ...PER_MINUTE(100) },
      { algorithm: 'token-bucket', ...PER_MINUTE(10) },
    ],
    ['the same limits, one shedding', PER_MINUTE(100), { windows: [{ limit: 100, period: '1m', lowBurst: 50 }] }],
  ])('%s', (_, first, second) => {
    const store = memoryStore()
    limiterWith(store, first)
    expect(limiterWith(store, second).warnings).toEqual([])
  })

  it('on two store objects', () => {
    limiterWith(memoryStore(), PER_MINUTE(100))
    expect(limiterWith(memoryStore(), PER_MINUTE(10)).warnings).toEqual([])
  })

  it('beside a limiter closed since', async () => {
    const store = memoryStore()
    await limiterWith(store, PER_MINUTE(100)).limiter.close()
    expect(limiterWith(store, PER_MINUTE(10)).warnings).toEqual([])
  })
})
