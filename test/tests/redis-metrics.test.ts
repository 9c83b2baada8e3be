import {
  createLimiter,
  HybridStore,
  type Limiter,
  type LiveRules,
  RedisStore,
  type RulesOptions,
  type WindowOptions,
} from '@tollgate/core'
import { prometheusMetrics } from '@tollgate/prometheus'
import { Redis } from 'ioredis'
import { Registry } from 'prom-client'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { DEFAULTS, Fleet, livePrefix } from '../src/live-rules-fixtures.js'
import { ManualClock } from '../src/manual-clock.js'
import { scrape, series } from '../src/prometheus-scrape.js'

// A minute boundary, so that fixed windows start with the clock.
const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 60_000)
let prefixes = 0
const closers: Array<() => Promise<unknown>> = []

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {})
})

function client(): Redis {
  const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 })
  redis.on('error', () => {})
  closers.push(async () => redis.disconnect())
  return redis
}

function limiterOn(store: RedisStore | HybridStore, rules: RulesOptions | LiveRules, options: object = {}): Limiter {
  const limiter = createLimiter({ store, rules, onWarning: () => {}, ...options })
  closers.push(() => limiter.close())
  return limiter
}

describe('Prometheus metrics on a RedisStore', () => {
  it('counts decisions Redis made, then those made while the client is stopped, by policy, and opens the breaker', async () => {
    const redis = client()
    const registry = new Registry()
    const windows = [{ limit: 2, period: '60s' }] satisfies WindowOptions[]
    const limiter = limiterOn(
      // Every decision goes to Redis: a refusal held in the process would answer 'api' without it.
      new RedisStore({ client: redis, prefix: `metrics${prefixes++}:`, refusalCache: false }),
      {
        api: { algorithm: 'fixed-window', windows },
        login: { algorithm: 'fixed-window', windows, onStoreError: 'deny' },
        search: { algorithm: 'fixed-window', windows, onStoreError: 'local' },
      },
      // Long enough that a busy machine's slow answer is not a timeout; the breaker opens at the third failure.
      { storeTimeoutMs: 10_000, breaker: { failureThreshold: 3, probeAfterMs: 60_000 } },
    )
    prometheusMetrics(limiter, { registry })
    const reasons: string[] = []
    const consume = async (rule: 'api' | 'login' | 'search') =>
      reasons.push(`${rule} ${(await limiter.consume(rule, 'ip:203.0.113.7')).reason}`)

    for (let i = 0; i < 3; i++) await consume('api')
    redis.disconnect()
    await consume('api')
    await consume('login')
    await consume('search')
    expect(limiter.breakerState).toBe('open')
    expect(series(await scrape(registry), 'tollgate_breaker_state').get('')).toBe(2)
    await consume('login')

    expect(reasons).toEqual([
      'api ok',
      'api ok',
      'api limited',
      'api store-error-allowed',
      'login store-error-denied',
      'search local-fallback',
      'login store-error-denied',
    ])
    const samples = await scrape(registry)
    const decisions = [...series(samples, 'tollgate_decisions_total')].filter(([, value]) => value > 0)
    expect(decisions).toEqual([
      ['rule="api",outcome="allowed"', 2],
      ['rule="api",outcome="limited"', 1],
      ['rule="api",outcome="store_error_allowed"', 1],
      ['rule="login",outcome="store_error_denied"', 2],
      ['rule="search",outcome="local_fallback"', 1],
    ])
    expect(series(samples, 'tollgate_window_denials_total').get('rule="api",window="60s"')).toBe(1)
    expect(series(samples, 'tollgate_store_errors_total')).toEqual(
      new Map([
        ['kind="timeout"', 0],
        ['kind="unavailable"', 3],
        ['kind="key"', 0],
        ['kind="breaker_open"', 1],
        ['kind="sync"', 0],
      ]),
    )
  })

  it('counts a key of another type as the decision’s own failure (kind key)', async () => {
    const redis = client()
    const registry = new Registry()
    const prefix = `metrics${prefixes++}:`
    const store = new RedisStore({ client: redis, prefix })
    const limiter = limiterOn(store, { api: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '60s' }] } })
    prometheusMetrics(limiter, { registry })
    const target = limiter.rules.get('api')
    if (target === undefined) throw new Error('rule api missing')
    const key = store.keyOf({
      rule: target.stateName,
      algorithm: target.algorithm,
      windows: target.windows,
      identifier: 'ip:a',
    })
    // Another program's list where the counter lives; it expires like every key the tests write.
    await redis.multi().lpush(key, 'x').pexpire(key, 60_000).exec()

    expect((await limiter.consume('api', 'ip:a')).reason).toBe('store-error-allowed')
    expect(series(await scrape(registry), 'tollgate_store_errors_total').get('kind="key"')).toBe(1)
  })
})

describe('Prometheus metrics on a HybridStore', () => {
  const rules = { api: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '60s' }] } } satisfies RulesOptions

  function hybrid(redis: Redis, clock: ManualClock, prefix: string) {
    const store = new HybridStore({ client: redis, clock: clock.now, prefix, autoSync: false })
    return store
  }

  it('reads tracked keys and staleness from stats() at each scrape, and times every sync', async () => {
    const clock = new ManualClock(T0)
    const registry = new Registry()
    const store = hybrid(client(), clock, `metrics${prefixes++}:`)
    const limiter = limiterOn(store, rules)
    prometheusMetrics(limiter, { registry })
    for (const id of ['ip:a', 'ip:b', 'ip:c']) await limiter.consume('api', id)
    clock.advance(2_500)
    const gauges = async () => {
      const samples = await scrape(registry)
      return {
        tracked: series(samples, 'tollgate_hybrid_tracked_keys').get(''),
        staleness: series(samples, 'tollgate_hybrid_staleness_seconds').get(''),
        syncs: series(samples, 'tollgate_hybrid_sync_duration_seconds_count').get(''),
      }
    }
    expect(await gauges()).toEqual({ tracked: 3, staleness: 2.5, syncs: 0 })

    const report = await store.syncNow()
    expect(report.error).toBeUndefined()
    expect(await gauges()).toEqual({ tracked: 3, staleness: 0, syncs: 1 })
    clock.advance(1_000)
    expect(await gauges()).toEqual({ tracked: 3, staleness: 1, syncs: 1 })
    expect(series(await scrape(registry), 'tollgate_hybrid_lease_round_trips_total')).toEqual(
      new Map([['rule="api"', 0]]),
    )
  })

  it('counts the units a process pushed above the limit by rule, and a failed sync as a store error', async () => {
    const clock = new ManualClock(T0)
    const prefix = `metrics${prefixes++}:`
    const first = hybrid(client(), clock, prefix)
    const secondClient = client()
    const second = hybrid(secondClient, clock, prefix)
    const registry = new Registry()
    const limiters = [limiterOn(first, rules), limiterOn(second, rules)]
    prometheusMetrics(limiters[1] as Limiter, { registry })
    // Each process admits the whole limit before either syncs: 10 admitted against a limit of 5.
    for (const limiter of limiters) {
      for (let i = 0; i < 5; i++) expect((await limiter.consume('api', 'ip:a')).allowed).toBe(true)
    }
    expect((await first.syncNow()).overAdmitted).toBe(0)
    const report = await second.syncNow()
    // For fixed windows the processes' over-admissions sum to admitted − limit.
    expect(report.overAdmitted).toBe(10 - 5)

    const overAdmitted = async () =>
      series(await scrape(registry), 'tollgate_hybrid_overadmitted_units_total').get('rule="api"')
    expect(await overAdmitted()).toBe(report.overAdmitted)
    // The store counts by state name (`api@<digest>`); the metric above is labelled by the rule's name.
    const stateName = (limiters[1] as Limiter).rules.get('api')!.stateName
    expect(second.stats().overAdmittedByRule).toEqual(new Map([[stateName, 5]]))

    secondClient.disconnect()
    await limiters[1]?.consume('api', 'ip:b')
    expect((await second.syncNow()).error?.code).toBe('TG_STORE')
    const samples = await scrape(registry)
    expect(series(samples, 'tollgate_store_errors_total').get('kind="sync"')).toBe(1)
    expect(series(samples, 'tollgate_hybrid_sync_duration_seconds_count').get('')).toBe(2)
    expect(await overAdmitted()).toBe(5)
  })

  it('labels the over-admission of a live rule whose shape changed with its name, not its state name', async () => {
    const clock = new ManualClock(T0)
    const redis = client()
    const fleet = new Fleet(redis, livePrefix('metrics-reshaped'), DEFAULTS)
    closers.push(() => fleet.close())
    const [first, second] = [fleet.add(), fleet.add()]
    const stores = [hybrid(client(), clock, fleet.prefix), hybrid(client(), clock, fleet.prefix)]
    const limiters = [limiterOn(stores[0] as HybridStore, first), limiterOn(stores[1] as HybridStore, second)]
    const registry = new Registry()
    prometheusMetrics(limiters[1] as Limiter, { registry })
    // A period other than the default's: the rule's state moves to api@<digest>.
    await first.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '30s' }] } })
    await second.refresh()
    expect(limiters[1]?.rules.get('api')?.stateName).toMatch(/^api@[A-Za-z0-9_-]{4}$/)
    for (const limiter of limiters) {
      for (let i = 0; i < 5; i++) expect((await limiter.consume('api', 'ip:a')).allowed).toBe(true)
    }
    expect((await stores[0]?.syncNow())?.overAdmitted).toBe(0)
    expect((await stores[1]?.syncNow())?.overAdmitted).toBe(5)
    const stateName = limiters[1]?.rules.get('api')?.stateName as string
    expect(stores[1]?.stats().overAdmittedByRule).toEqual(new Map([[stateName, 5]]))
    const overAdmitted = series(await scrape(registry), 'tollgate_hybrid_overadmitted_units_total')
    expect(overAdmitted).toEqual(new Map([['rule="api"', 5]]))
  })
})
