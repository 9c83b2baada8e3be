import type { EventEmitter } from 'node:events'
import {
  createLimiter,
  DECISION_OUTCOMES,
  HybridStore,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  type RulesOptions,
} from '@tollgate/core'
import { useRedis } from '@tollgate/test-support'
import { ManualClock } from '@tollgate/test-support/manual-clock'
import { afterEach, describe, expect, it } from 'vitest'
import { type OpenTelemetryMetricsOptions, openTelemetryMetrics } from '../src/index.js'
import { attributesKey, CollectedMetrics } from './collect.js'
import { downStore } from './down-store.js'

const RULES = {
  api: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '60s' }] },
  down: { windows: [{ limit: 5, period: '60s' }], onStoreError: 'deny' },
} satisfies RulesOptions
const IP = 'ip:203.0.113.7'
const KINDS = ['timeout', 'unavailable', 'key', 'breaker_open', 'sync']

const redis = useRedis()
let prefixes = 0
const opened: Limiter[] = []
let metrics: CollectedMetrics

afterEach(async () => {
  for (const limiter of opened.splice(0)) await limiter.close()
  await metrics?.shutdown()
})

/** A limiter on a store of its own, whose rule `down` always finds the store unavailable. */
function limiterOf(options: Partial<LimiterOptions> = {}): Limiter {
  const limiter = createLimiter({
    store: downStore(new MemoryStore({ clock: new ManualClock().now })),
    rules: RULES,
    onWarning: () => {},
    ...options,
  } as LimiterOptions)
  opened.push(limiter)
  return limiter
}

/** `api` decisions first (the first 10 allowed, the rest limited), then `down` ones. */
async function decide(limiter: Limiter, api: number, down = 0): Promise<void> {
  for (let i = 0; i < api; i++) await limiter.consume('api', IP)
  for (let i = 0; i < down; i++) await limiter.consume('down', IP)
}

function attach(limiter: Limiter, options: OpenTelemetryMetricsOptions = {}) {
  return openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider, timeEvery: 1, ...options })
}

/**
 * Every point of `tollgate.rate_limiting.requests` for the rules `counts` names (`'rule result'`),
 * at 0 unless `counts` says otherwise: a rule decided on has every result.
 */
function requests(counts: Record<string, number>, base: Record<string, string> = {}): Map<string, number> {
  const expected = new Map<string, number>()
  for (const name of new Set(Object.keys(counts).map((key) => key.split(' ')[0] as string))) {
    for (const outcome of DECISION_OUTCOMES) {
      const key = attributesKey({
        ...base,
        'tollgate.rate_limiting.rule': name,
        'tollgate.rate_limiting.result': outcome,
      })
      expected.set(key, counts[`${name} ${outcome}`] ?? 0)
    }
  }
  return expected
}

function storeErrors(counts: Record<string, number>, base: Record<string, string> = {}): Map<string, number> {
  return new Map(KINDS.map((kind) => [attributesKey({ ...base, 'error.type': kind }), counts[kind] ?? 0]))
}

describe('openTelemetryMetrics: several limiters on one MeterProvider', () => {
  // The SDK keeps one value per attribute set from a collection: each limiter's callback used to
  // replace the others', and only the last limiter attached was exported.
  it("exports the sum of three limiters' decisions and store errors, not the last one's", async () => {
    metrics = new CollectedMetrics()
    const first = limiterOf({ breaker: { failureThreshold: 2, probeAfterMs: 60_000 } })
    const second = limiterOf()
    const third = limiterOf()
    for (const limiter of [first, second, third]) attach(limiter)
    await decide(first, 15, 2)
    await decide(second, 30, 1)
    await decide(third, 61)
    ;(second as unknown as EventEmitter).emit('rules', { epoch: 7 })
    ;(third as unknown as EventEmitter).emit('rules', { epoch: 3 })
    expect([first, second, third].map((limiter) => limiter.breakerState)).toEqual(['open', 'closed', 'closed'])

    const collected = await metrics.collect()
    const decided = { 'api allowed': 30, 'api limited': 5 + 20 + 51, 'down store_error_denied': 3 }
    expect(collected.get('tollgate.rate_limiting.requests')).toEqual(requests(decided))
    expect(collected.get('tollgate.rate_limiting.cost')).toEqual(requests(decided))
    expect(collected.get('tollgate.rate_limiting.window.denials')).toEqual(
      new Map([
        [attributesKey({ 'tollgate.rate_limiting.rule': 'api', 'tollgate.rate_limiting.window': '60s' }), 76],
        [attributesKey({ 'tollgate.rate_limiting.rule': 'down', 'tollgate.rate_limiting.window': '60s' }), 0],
      ]),
    )
    expect(collected.get('tollgate.store.errors')).toEqual(storeErrors({ unavailable: 3 }))
    // The most open breaker: one limiter's store failing is enough to show.
    expect(collected.get('tollgate.breaker.state')).toEqual(new Map([['{}', 2]]))
    expect(collected.get('tollgate.rules.epoch')).toEqual(new Map([['{}', 7]]))
    expect(collected.get('tollgate.rules.reloads')).toEqual(
      new Map([[attributesKey({ 'tollgate.rules.reload.result': 'applied' }), 2]]),
    )
    expect(collected.get('tollgate.rate_limiting.decision.duration')?.get('{}')).toMatchObject({
      count: 15 + 2 + 30 + 1 + 61,
    })
  })

  it('sums two limiters per attribute set, each rule where its limiter decided on it', async () => {
    metrics = new CollectedMetrics()
    const first = limiterOf()
    const second = limiterOf({
      rules: { ...RULES, login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '60s' }] } },
    })
    attach(first)
    attach(second)
    await decide(first, 12, 1)
    await decide(second, 3)
    for (let i = 0; i < 3; i++) await second.consume('login', IP)

    const collected = await metrics.collect()
    const login = (result: string) =>
      attributesKey({ 'tollgate.rate_limiting.rule': 'login', 'tollgate.rate_limiting.result': result })
    const expected = requests({ 'api allowed': 13, 'api limited': 2, 'down store_error_denied': 1 })
    for (const outcome of DECISION_OUTCOMES) expected.set(login(outcome), 0)
    expected.set(login('allowed'), 1)
    expected.set(login('limited'), 2)
    expect(collected.get('tollgate.rate_limiting.requests')).toEqual(expected)
    expect(collected.get('tollgate.store.errors')).toEqual(storeErrors({ unavailable: 1 }))
    expect(collected.get('tollgate.breaker.state')).toEqual(new Map([['{}', 0]]))
  })

  it('tells limiters apart by tollgate.limiter.name when they are given limiterName', async () => {
    metrics = new CollectedMetrics()
    const publicApi = limiterOf({ breaker: { failureThreshold: 1, probeAfterMs: 60_000 } })
    const partners = limiterOf()
    attach(publicApi, { limiterName: 'public' })
    attach(partners, { limiterName: 'partners' })
    await decide(publicApi, 15, 1)
    await decide(partners, 30)
    ;(partners as unknown as EventEmitter).emit('rules', { epoch: 4 })
    const named = (limiterName: string) => ({ 'tollgate.limiter.name': limiterName })

    const collected = await metrics.collect()
    expect(collected.get('tollgate.rate_limiting.requests')).toEqual(
      new Map([
        ...requests({ 'api allowed': 10, 'api limited': 5, 'down store_error_denied': 1 }, named('public')),
        ...requests({ 'api allowed': 10, 'api limited': 20 }, named('partners')),
      ]),
    )
    expect(collected.get('tollgate.store.errors')).toEqual(
      new Map([...storeErrors({ unavailable: 1 }, named('public')), ...storeErrors({}, named('partners'))]),
    )
    expect(collected.get('tollgate.breaker.state')).toEqual(
      new Map([
        [attributesKey(named('public')), 2],
        [attributesKey(named('partners')), 0],
      ]),
    )
    expect(collected.get('tollgate.rules.epoch')).toEqual(
      new Map([
        [attributesKey(named('public')), 0],
        [attributesKey(named('partners')), 4],
      ]),
    )
    expect(collected.get('tollgate.rules.reloads')).toEqual(
      new Map([[attributesKey({ ...named('partners'), 'tollgate.rules.reload.result': 'applied' }), 1]]),
    )
    const durations = collected.get('tollgate.rate_limiting.decision.duration')
    expect(durations?.get(attributesKey(named('public')))).toMatchObject({ count: 16 })
    expect(durations?.get(attributesKey(named('partners')))).toMatchObject({ count: 30 })
  })

  it('close() of one limiter takes out only what it added', async () => {
    metrics = new CollectedMetrics()
    const staying = limiterOf()
    const leaving = limiterOf()
    attach(staying)
    const leavingMetrics = attach(leaving)
    await decide(staying, 15, 1)
    await decide(leaving, 30, 2)
    expect((await metrics.collect()).get('tollgate.store.errors')).toEqual(storeErrors({ unavailable: 3 }))

    leavingMetrics.close()
    await decide(staying, 1)
    await decide(leaving, 5, 1)
    const collected = await metrics.collect()
    expect(collected.get('tollgate.rate_limiting.requests')).toEqual(
      requests({ 'api allowed': 10, 'api limited': 6, 'down store_error_denied': 1 }),
    )
    expect(collected.get('tollgate.store.errors')).toEqual(storeErrors({ unavailable: 1 }))
    expect(collected.get('tollgate.rate_limiting.decision.duration')?.get('{}')).toMatchObject({
      count: 15 + 1 + 30 + 2 + 1,
    })
  })

  it('reports a limiter attached after every other was closed from its own counts', async () => {
    metrics = new CollectedMetrics()
    const before = limiterOf()
    const beforeMetrics = attach(before)
    await decide(before, 12)
    expect((await metrics.collect()).get('tollgate.rate_limiting.requests')).toEqual(
      requests({ 'api allowed': 10, 'api limited': 2 }),
    )
    beforeMetrics.close()

    const after = limiterOf()
    attach(after)
    await decide(after, 3, 1)
    expect((await metrics.collect()).get('tollgate.rate_limiting.requests')).toEqual(
      requests({ 'api allowed': 3, 'down store_error_denied': 1 }),
    )
  })

  it('reports a HybridStore two limiters share once: its keys, its staleness, its syncs and their failures', async () => {
    metrics = new CollectedMetrics()
    const clock = new ManualClock()
    // A client already disconnected: every sync of the shared store fails, and says so.
    const offline = redis().duplicate()
    offline.on('error', () => {})
    offline.disconnect()
    const prefix = `otel-several${prefixes++}:`
    const shared = new HybridStore({ client: offline, prefix, autoSync: false, clock: clock.now })
    const own = new HybridStore({ client: redis(), prefix, autoSync: false, clock: clock.now })
    const rules = { api: RULES.api }
    const [first, second, third] = [shared, shared, own].map((store) => limiterOf({ store, rules }))
    const attached = [first, second, third].map((limiter) => attach(limiter as Limiter))
    await (first as Limiter).consume('api', 'ip:a')
    await (second as Limiter).consume('api', 'ip:b')
    await (third as Limiter).consume('api', 'ip:c')
    clock.advance(5_000)
    expect((await shared.syncNow()).error).toBeDefined()
    expect((await own.syncNow()).error).toBeUndefined()

    const collected = await metrics.collect()
    const trackedKeys = shared.stats().trackedKeys + own.stats().trackedKeys
    expect(trackedKeys).toBe(3)
    expect(collected.get('tollgate.hybrid.tracked_keys')).toEqual(new Map([['{}', trackedKeys]]))
    // The stalest store: the shared one never reached Redis.
    expect(collected.get('tollgate.hybrid.staleness')).toEqual(new Map([['{}', 5]]))
    expect(collected.get('tollgate.store.errors')).toEqual(storeErrors({ sync: 1 }))
    expect(collected.get('tollgate.hybrid.sync.duration')?.get('{}')).toMatchObject({ count: 2 })
    expect(collected.get('tollgate.hybrid.overadmitted')).toEqual(
      new Map([[attributesKey({ 'tollgate.rate_limiting.rule': 'api' }), 0]]),
    )
    // Each limiter's own counts still hold the failed sync of its store.
    expect(attached.map((telemetry) => telemetry.counts.storeErrors.sync)).toEqual([1, 1, 0])
  })

  it('refuses a limiter twice, and settings the duration histogram cannot hold for two limiters', () => {
    metrics = new CollectedMetrics()
    const limiter = limiterOf()
    const attempt = (options: OpenTelemetryMetricsOptions) => () => attach(limiterOf(), options)
    attach(limiter).close()
    attach(limiter)
    expect(() => attach(limiter, { limiterName: 'again' })).toThrow(
      /this limiter already reports to this MeterProvider; close\(\) the metrics attached before/,
    )
    expect(attempt({ timeEvery: 100 })).toThrow(
      /option timeEvery must be the same for every limiter on one MeterProvider, whose tollgate.rate_limiting.decision.duration is one histogram: got 100, and 1 for the first limiter attached there/,
    )
    expect(attempt({ durationBuckets: [0.001, 1] })).toThrow(
      /option durationBuckets must be the same for every limiter on one MeterProvider.*got \[0.001,1\], and \[/,
    )
    expect(attempt({ limiterName: '' })).toThrow(/option limiterName must be a non-empty string, got ""/)
    expect(attempt({ limiterName: 7 as unknown as string })).toThrow(/limiterName must be a non-empty string, got 7/)
  })
})
