import type { EventEmitter } from 'node:events'
import {
  createLimiter,
  DECISION_OUTCOMES,
  type DecisionReason,
  type Limiter,
  MemoryStore,
  type RulesOptions,
  type Store,
  type StoreRequest,
  TollgateConfigError,
  TollgateError,
  type WindowOptions,
} from '@tollgate/core'
import { ManualClock } from '@tollgate/test-support/manual-clock'
import { scrape, series } from '@tollgate/test-support/prometheus-scrape'
import { seededUniform } from '@tollgate/test-support/seeded-random'
import { Registry } from 'prom-client'
import { afterEach, describe, expect, it } from 'vitest'
import { prometheusMetrics } from '../src/index.js'

/** Decides on a MemoryStore through `evaluate`, as a network store does, and fails as `failures` says for some rules. */
class FlakyStore implements Store {
  readonly memory: MemoryStore

  constructor(
    clock: ManualClock,
    private readonly failures: Record<string, (request: StoreRequest) => Promise<never>>,
  ) {
    this.memory = new MemoryStore({ clock: clock.now })
  }

  evaluate(request: StoreRequest) {
    // A target names the rule's state, `name@<digest of its shape>`.
    const fail = this.failures[request.targets[0]?.rule.split('@')[0] ?? '']
    return fail ? fail(request) : this.memory.evaluate(request)
  }

  reset(targets: Parameters<Store['reset']>[0]) {
    return this.memory.reset(targets)
  }

  close() {
    return this.memory.close()
  }
}

const refused = () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'))

const RULES = {
  api: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '60s' }] },
  shedding: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '60s', lowBurst: 1 }] },
  shadow: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '60s' }], dryRun: true },
  'down.open': { windows: [{ limit: 5, period: '60s' }] },
  'down.closed': { windows: [{ limit: 5, period: '60s' }], onStoreError: 'deny' },
  'down.local': { windows: [{ limit: 5, period: '60s' }], onStoreError: 'local' },
} satisfies RulesOptions

const OUTCOME_OF: Record<DecisionReason, string> = {
  ok: 'allowed',
  limited: 'limited',
  shed: 'shed',
  'dry-run': 'dry_run',
  'store-error-allowed': 'store_error_allowed',
  'store-error-denied': 'store_error_denied',
  'local-fallback': 'local_fallback',
  'degraded-local': 'degraded_local',
  overloaded: 'overloaded',
  blocked: 'blocked',
}

let limiter: Limiter | undefined

afterEach(async () => {
  await limiter?.close()
  limiter = undefined
})

describe('prometheusMetrics', () => {
  it('counts a known sequence of decisions by rule and outcome, units, refusing windows and store errors', async () => {
    const registry = new Registry()
    const store = new FlakyStore(new ManualClock(), {
      'down.open': refused,
      'down.closed': refused,
      'down.local': refused,
    })
    limiter = createLimiter({
      store,
      rules: RULES,
      random: seededUniform(7),
      breaker: { failureThreshold: 1000 },
      onWarning: () => {},
    })
    prometheusMetrics(limiter, { registry, timeEvery: 1 })

    const seen: Array<[string, DecisionReason, number]> = []
    const consume = async (rule: keyof typeof RULES, cost = 1) => {
      const decision = await (limiter as Limiter).consume(rule, 'ip:203.0.113.7', { cost })
      seen.push([rule, decision.reason, cost])
    }
    for (let i = 0; i < 3; i++) await consume('api')
    await (limiter as Limiter).consume('api', 'ip:198.51.100.1', { cost: 2 })
    seen.push(['api', 'ok', 2])
    for (let i = 0; i < 3; i++) await consume('shedding')
    for (let i = 0; i < 2; i++) await consume('shadow')
    await consume('down.open')
    await consume('down.closed')
    await consume('down.closed')
    await consume('down.local')
    // Neither a peek nor a refund is a decision that admits anything: not counted.
    await (limiter as Limiter).peek('api', 'ip:203.0.113.7')
    await (limiter as Limiter).refund('api', 'ip:198.51.100.1')

    expect(seen.map(([rule, reason]) => `${rule} ${reason}`)).toEqual([
      'api ok',
      'api ok',
      'api limited',
      'api ok',
      'shedding ok',
      'shedding shed',
      'shedding shed',
      'shadow ok',
      'shadow dry-run',
      'down.open store-error-allowed',
      'down.closed store-error-denied',
      'down.closed store-error-denied',
      'down.local local-fallback',
    ])
    const expectedDecisions = new Map<string, number>()
    const expectedUnits = new Map<string, number>()
    for (const rule of Object.keys(RULES)) {
      for (const outcome of DECISION_OUTCOMES) {
        expectedDecisions.set(`rule="${rule}",outcome="${outcome}"`, 0)
        expectedUnits.set(`rule="${rule}",outcome="${outcome}"`, 0)
      }
    }
    for (const [rule, reason, cost] of seen) {
      const key = `rule="${rule}",outcome="${OUTCOME_OF[reason]}"`
      expectedDecisions.set(key, (expectedDecisions.get(key) as number) + 1)
      expectedUnits.set(key, (expectedUnits.get(key) as number) + cost)
    }

    const samples = await scrape(registry)
    expect(series(samples, 'tollgate_decisions_total')).toEqual(expectedDecisions)
    expect(series(samples, 'tollgate_cost_units_total')).toEqual(expectedUnits)
    expect(series(samples, 'tollgate_decisions_total').get('rule="api",outcome="allowed"')).toBe(3)
    expect(series(samples, 'tollgate_cost_units_total').get('rule="api",outcome="allowed"')).toBe(4)
    expect(series(samples, 'tollgate_window_denials_total')).toEqual(
      new Map([
        ['rule="api",window="60s"', 1],
        ['rule="shedding",window="60s"', 2],
        ['rule="shadow",window="60s"', 1],
        ['rule="down.open",window="60s"', 0],
        ['rule="down.closed",window="60s"', 0],
        ['rule="down.local",window="60s"', 0],
      ]),
    )
    expect(series(samples, 'tollgate_store_errors_total')).toEqual(
      new Map([
        ['kind="timeout"', 0],
        ['kind="unavailable"', 4],
        ['kind="key"', 0],
        ['kind="breaker_open"', 0],
        ['kind="sync"', 0],
      ]),
    )
    expect(series(samples, 'tollgate_breaker_state')).toEqual(new Map([['', 0]]))
    // timeEvery 1: every consume decision timed, none of the peek and the refund.
    const durations = series(samples, 'tollgate_decision_duration_seconds_count')
    expect(durations).toEqual(new Map([['', seen.length]]))
    expect(series(samples, 'tollgate_decision_duration_seconds_bucket').get('le="+Inf"')).toBe(seen.length)
    expect(series(samples, 'tollgate_decision_duration_seconds_sum').get('')).toBeGreaterThan(0)
  })

  it('counts a decision once per window that refused it, under the rule of that window, whatever the identifiers', async () => {
    const registry = new Registry()
    const clock = new ManualClock()
    limiter = createLimiter({
      store: new MemoryStore({ clock: clock.now }),
      rules: {
        api: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '1h' }] },
        login: {
          algorithm: 'fixed-window',
          parent: 'api',
          windows: [
            { limit: 1, period: '3s' },
            { limit: 10, period: '60s' },
          ],
        },
      },
    })
    prometheusMetrics(limiter, { registry })
    const ids = ['ip:203.0.113.7', 'user:42']
    const refusedBy: string[][] = []
    for (const wait of [0, 0, 3000, 3000]) {
      clock.advance(wait)
      const decision = await limiter.consume('login', ids)
      refusedBy.push(decision.windows.filter((w) => w.failed).map((w) => `${w.rule} ${w.periodMs} ${w.identifier}`))
    }
    // The second decision: login's 3 s window refuses both identifiers; the fourth: api's hour does.
    expect(refusedBy).toEqual([
      [],
      ['login 3000 ip:203.0.113.7', 'login 3000 user:42'],
      [],
      ['api 3600000 ip:203.0.113.7', 'api 3600000 user:42'],
    ])

    const samples = await scrape(registry)
    expect(series(samples, 'tollgate_window_denials_total')).toEqual(
      new Map([
        ['rule="login",window="3s"', 1],
        ['rule="login",window="60s"', 0],
        ['rule="api",window="3600s"', 1],
      ]),
    )
    const decisions = series(samples, 'tollgate_decisions_total')
    expect(decisions.get('rule="login",outcome="limited"')).toBe(2)
    expect(decisions.get('rule="login",outcome="allowed"')).toBe(2)
    // The parent is labelled for its windows; decisions asked of it are none.
    expect(decisions.get('rule="api",outcome="allowed"')).toBe(0)
  })

  it('labels timeouts, one decision’s own failures and the open breaker apart', async () => {
    const registry = new Registry()
    const store = new FlakyStore(new ManualClock(), {
      slow: () => new Promise<never>(() => {}),
      broken: () =>
        Promise.reject(new TollgateError('TG_STORE', 'state of tg:broken is unreadable', { storeDown: false })),
      down: refused,
    })
    limiter = createLimiter({
      store,
      rules: {
        slow: { windows: [{ limit: 5, period: '1m' }] },
        broken: { windows: [{ limit: 5, period: '1m' }] },
        down: { windows: [{ limit: 5, period: '1m' }], onStoreError: 'deny' },
      },
      breaker: { failureThreshold: 2, probeAfterMs: 60_000 },
      onWarning: () => {},
    })
    prometheusMetrics(limiter, { registry })
    const errors = async () => series(await scrape(registry), 'tollgate_store_errors_total')
    const breaker = async () => series(await scrape(registry), 'tollgate_breaker_state').get('')

    expect((await limiter.consume('broken', 'ip:a')).reason).toBe('store-error-allowed')
    expect((await limiter.consume('slow', 'ip:a', { storeTimeoutMs: 1 })).reason).toBe('store-error-allowed')
    expect(await breaker()).toBe(0)
    expect((await limiter.consume('down', 'ip:a')).reason).toBe('store-error-denied')
    expect(await breaker()).toBe(2)
    // The breaker is open: the store is not asked.
    expect((await limiter.consume('down', 'ip:a')).reason).toBe('store-error-denied')
    await expect(limiter.reset('down', 'ip:a')).rejects.toMatchObject({ code: 'TG_STORE' })

    expect(await errors()).toEqual(
      new Map([
        ['kind="timeout"', 1],
        ['kind="unavailable"', 1],
        ['kind="key"', 1],
        ['kind="breaker_open"', 2],
        ['kind="sync"', 0],
      ]),
    )
  })

  // Identifiers are never labels: the series a scrape shows depend on the rules and outcomes only.
  it('leaves the series count as it was after 100,000 distinct identifiers', async () => {
    const registry = new Registry()
    limiter = createLimiter({ rules: { api: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }] } } })
    prometheusMetrics(limiter, { registry })
    await limiter.consume('api', 'ip:0')
    await limiter.consume('api', 'ip:0')
    const before = await scrape(registry)
    for (let i = 1; i <= 100_000; i++) await limiter.consume('api', `ip:${i}`)
    const after = await scrape(registry)

    expect([...after.keys()]).toEqual([...before.keys()])
    expect(series(after, 'tollgate_decisions_total').get('rule="api",outcome="allowed"')).toBe(100_001)
    expect(await registry.metrics()).not.toMatch(/ip:/)
  })

  it('counts the rules past maxRules together as __other__, their windows too', async () => {
    const registry = new Registry()
    const windows = [{ limit: 1, period: '1m' }] satisfies WindowOptions[]
    limiter = createLimiter({ rules: { a: { windows }, b: { windows }, c: { windows }, d: { windows } } })
    prometheusMetrics(limiter, { registry, maxRules: 2 })
    for (const rule of ['a', 'b', 'c', 'd', 'd']) await limiter.consume(rule, 'ip:a')

    const samples = await scrape(registry)
    const allowed = [...series(samples, 'tollgate_decisions_total')].filter(([key]) => key.endsWith('"allowed"'))
    expect(allowed).toEqual([
      ['rule="a",outcome="allowed"', 1],
      ['rule="b",outcome="allowed"', 1],
      ['rule="__other__",outcome="allowed"', 2],
    ])
    expect(series(samples, 'tollgate_decisions_total').get('rule="__other__",outcome="limited"')).toBe(1)
    expect(series(samples, 'tollgate_window_denials_total').get('rule="__other__",window="__other__"')).toBe(1)
  })

  it('times one decision in timeEvery', async () => {
    const registry = new Registry()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 1000, period: '1m' }] } } })
    prometheusMetrics(limiter, { registry, timeEvery: 10, durationBuckets: [0.001, 1] })
    for (let i = 0; i < 95; i++) await limiter.consume('api', 'ip:a')

    const samples = await scrape(registry)
    expect(series(samples, 'tollgate_decision_duration_seconds_count').get('')).toBe(9)
    expect([...series(samples, 'tollgate_decision_duration_seconds_bucket').keys()]).toEqual([
      'le="0.001"',
      'le="1"',
      'le="+Inf"',
    ])
  })

  it('follows the rules events: the epoch and each reload applied or rejected', async () => {
    const registry = new Registry()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 1, period: '1m' }] } } })
    prometheusMetrics(limiter, { registry })
    const samples = async () => await scrape(registry)
    expect(series(await samples(), 'tollgate_rules_epoch')).toEqual(new Map([['', 0]]))
    expect(series(await samples(), 'tollgate_rules_reloads_total')).toEqual(
      new Map([
        ['result="applied"', 0],
        ['result="rejected"', 0],
      ]),
    )
    const events = limiter as unknown as EventEmitter
    events.emit('rules', { epoch: 3, rules: new Map() })
    events.emit('rules-rejected', { error: new TollgateConfigError('bad rules') })
    events.emit('rules', { epoch: 4, rules: new Map() })

    expect(series(await samples(), 'tollgate_rules_epoch')).toEqual(new Map([['', 4]]))
    expect(series(await samples(), 'tollgate_rules_reloads_total')).toEqual(
      new Map([
        ['result="applied"', 2],
        ['result="rejected"', 1],
      ]),
    )
  })

  it('registers no HybridStore metrics for another store', async () => {
    const registry = new Registry()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 1, period: '1m' }] } } })
    prometheusMetrics(limiter, { registry })
    expect((await registry.metrics()).includes('tollgate_hybrid')).toBe(false)
  })

  it('close() detaches from the limiter and leaves the registry as it found it', async () => {
    const registry = new Registry()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 10, period: '1m' }] } } })
    const metrics = prometheusMetrics(limiter, { registry })
    await limiter.consume('api', 'ip:a')
    metrics.close()
    await limiter.consume('api', 'ip:a')

    expect(registry.getMetricsAsArray()).toEqual([])
    expect([...metrics.counts.rules()][0]?.decisions[0]).toBe(1)
    // Registered again on the same registry, from zero.
    prometheusMetrics(limiter, { registry })
    expect(series(await scrape(registry), 'tollgate_decisions_total')).toEqual(new Map())
  })

  it('refuses a second registration on the same registry, naming the metric, and registers nothing', () => {
    const registry = new Registry()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 10, period: '1m' }] } } })
    prometheusMetrics(limiter, { registry })
    const count = registry.getMetricsAsArray().length
    expect(() => prometheusMetrics(limiter as Limiter, { registry })).toThrow(
      /registry already holds tollgate_decisions_total/,
    )
    expect(registry.getMetricsAsArray()).toHaveLength(count)
  })

  it('refuses bad options at once, naming the option and the value', () => {
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 10, period: '1m' }] } } })
    const registry = new Registry()
    const attempt = (options: object) => () => prometheusMetrics(limiter as Limiter, { registry, ...options })
    expect(attempt({ maxRule: 5 })).toThrow(TollgateConfigError)
    expect(attempt({ maxRule: 5 })).toThrow(/unknown option 'maxRule'/)
    expect(attempt({ maxRules: 0 })).toThrow(/maxRules must be an integer from 1 to 10000, got 0/)
    expect(attempt({ timeEvery: -1 })).toThrow(/timeEvery must be a whole number ≥ 0 .*got -1/)
    expect(attempt({ durationBuckets: [0.1, 0.01] })).toThrow(
      /durationBuckets must be .* ascending .*got \[0\.1,0\.01\]/,
    )
    expect(attempt({ registry: {} })).toThrow(/option registry must be a prom-client Registry/)
    expect(() => prometheusMetrics({} as Limiter)).toThrow(/takes a limiter made by createLimiter/)
    expect(registry.getMetricsAsArray()).toEqual([])
  })
})
