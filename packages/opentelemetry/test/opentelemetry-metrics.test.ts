import type { EventEmitter } from 'node:events'
import { context, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import {
  createLimiter,
  DECISION_OUTCOMES,
  type Limiter,
  MemoryStore,
  TollgateConfigError,
  type WindowOptions,
} from '@tollgate/core'
import { ManualClock } from '@tollgate/test-support/manual-clock'
import { seededUniform } from '@tollgate/test-support/seeded-random'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { openTelemetryMetrics } from '../src/index.js'
import { attributesKey, CollectedMetrics } from './collect.js'
import { downStore } from './down-store.js'

const rule = (name: string, result: string) =>
  attributesKey({ 'tollgate.rate_limiting.rule': name, 'tollgate.rate_limiting.result': result })

let limiter: Limiter | undefined
let metrics: CollectedMetrics

afterEach(async () => {
  await limiter?.close()
  limiter = undefined
  await metrics?.shutdown()
})

describe('openTelemetryMetrics: instruments', () => {
  it('counts a known sequence of decisions as tollgate.rate_limiting.requests by rule and result', async () => {
    metrics = new CollectedMetrics()
    limiter = createLimiter({
      store: downStore(new MemoryStore({ clock: new ManualClock().now })),
      rules: {
        api: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '60s' }] },
        shedding: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '60s', lowBurst: 1 }] },
        shadow: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '60s' }], dryRun: true },
        down: { windows: [{ limit: 5, period: '60s' }], onStoreError: 'deny' },
      },
      random: seededUniform(11),
      onWarning: () => {},
    })
    openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider, timeEvery: 1 })
    const reasons: string[] = []
    const consume = async (name: 'api' | 'shedding' | 'shadow' | 'down', cost = 1) =>
      reasons.push(`${name} ${(await (limiter as Limiter).consume(name, 'ip:203.0.113.7', { cost })).reason}`)
    for (let i = 0; i < 3; i++) await consume('api')
    for (let i = 0; i < 3; i++) await consume('shedding')
    for (let i = 0; i < 2; i++) await consume('shadow')
    await consume('down', 3)
    expect(reasons).toEqual([
      'api ok',
      'api ok',
      'api limited',
      'shedding ok',
      'shedding shed',
      'shedding shed',
      'shadow ok',
      'shadow dry-run',
      'down store-error-denied',
    ])

    const collected = await metrics.collect()
    const requests = collected.get('tollgate.rate_limiting.requests')
    const expected = new Map<string, number>()
    for (const name of ['api', 'shedding', 'shadow', 'down']) {
      for (const outcome of DECISION_OUTCOMES) expected.set(rule(name, outcome), 0)
    }
    expected.set(rule('api', 'allowed'), 2)
    expected.set(rule('api', 'limited'), 1)
    expected.set(rule('shedding', 'allowed'), 1)
    expected.set(rule('shedding', 'shed'), 2)
    expected.set(rule('shadow', 'allowed'), 1)
    expected.set(rule('shadow', 'dry_run'), 1)
    expected.set(rule('down', 'store_error_denied'), 1)
    expect(requests).toEqual(expected)
    expect(collected.get('tollgate.rate_limiting.cost')?.get(rule('down', 'store_error_denied'))).toBe(3)
    expect(collected.get('tollgate.rate_limiting.window.denials')).toEqual(
      new Map([
        [attributesKey({ 'tollgate.rate_limiting.rule': 'api', 'tollgate.rate_limiting.window': '60s' }), 1],
        [attributesKey({ 'tollgate.rate_limiting.rule': 'shedding', 'tollgate.rate_limiting.window': '60s' }), 2],
        [attributesKey({ 'tollgate.rate_limiting.rule': 'shadow', 'tollgate.rate_limiting.window': '60s' }), 1],
        [attributesKey({ 'tollgate.rate_limiting.rule': 'down', 'tollgate.rate_limiting.window': '60s' }), 0],
      ]),
    )
    expect(collected.get('tollgate.store.errors')).toEqual(
      new Map(
        ['timeout', 'unavailable', 'key', 'breaker_open', 'sync'].map((kind) => [
          attributesKey({ 'error.type': kind }),
          kind === 'unavailable' ? 1 : 0,
        ]),
      ),
    )
    expect(collected.get('tollgate.breaker.state')).toEqual(new Map([['{}', 0]]))
    expect(collected.get('tollgate.rate_limiting.decision.duration')?.get('{}')).toMatchObject({
      count: reasons.length,
    })
    expect(collected.has('tollgate.hybrid.staleness')).toBe(false)
  })

  it('leaves the series as they were after 100,000 distinct identifiers', async () => {
    metrics = new CollectedMetrics()
    limiter = createLimiter({ rules: { api: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }] } } })
    // Every decision timed: the duration histogram has its one series from the first.
    openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider, timeEvery: 1 })
    await limiter.consume('api', 'ip:0')
    await limiter.consume('api', 'ip:0')
    const seriesOf = (collected: Map<string, Map<string, unknown>>) =>
      [...collected].flatMap(([name, points]) => [...points.keys()].map((key) => `${name} ${key}`))
    const before = seriesOf(await metrics.collect())
    for (let i = 1; i <= 100_000; i++) await limiter.consume('api', `ip:${i}`)
    const after = await metrics.collect()

    expect(seriesOf(after)).toEqual(before)
    expect(after.get('tollgate.rate_limiting.requests')?.get(rule('api', 'allowed'))).toBe(100_001)
  })

  it('counts the rules past maxRules together as __other__', async () => {
    metrics = new CollectedMetrics()
    const windows = [{ limit: 1, period: '1m' }] satisfies WindowOptions[]
    limiter = createLimiter({ rules: { a: { windows }, b: { windows }, c: { windows } } })
    openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider, maxRules: 1 })
    for (const name of ['a', 'b', 'c']) await limiter.consume(name, 'ip:a')

    const requests = (await metrics.collect()).get('tollgate.rate_limiting.requests')
    expect(requests?.get(rule('a', 'allowed'))).toBe(1)
    expect(requests?.get(rule('__other__', 'allowed'))).toBe(2)
    expect([...(requests?.keys() ?? [])].filter((key) => key.includes('"b"') || key.includes('"c"'))).toEqual([])
  })

  it('counts the rules events: reloads by result, and the epoch', async () => {
    metrics = new CollectedMetrics()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 1, period: '1m' }] } } })
    openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider })
    const events = limiter as unknown as EventEmitter
    events.emit('rules', { epoch: 7 })
    events.emit('rules-rejected', { error: new TollgateConfigError('bad rules') })

    const collected = await metrics.collect()
    expect(collected.get('tollgate.rules.epoch')).toEqual(new Map([['{}', 7]]))
    expect(collected.get('tollgate.rules.reloads')).toEqual(
      new Map([
        [attributesKey({ 'tollgate.rules.reload.result': 'applied' }), 1],
        [attributesKey({ 'tollgate.rules.reload.result': 'rejected' }), 1],
      ]),
    )
  })

  it('close() detaches from the limiter and stops observing', async () => {
    metrics = new CollectedMetrics()
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 10, period: '1m' }] } } })
    const telemetry = openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider })
    await limiter.consume('api', 'ip:a')
    telemetry.close()
    await limiter.consume('api', 'ip:a')

    expect([...telemetry.counts.rules()][0]?.decisions[0]).toBe(1)
    expect((await metrics.collect()).has('tollgate.rate_limiting.requests')).toBe(false)
  })

  it('refuses bad options at once, naming the option and the value', () => {
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 10, period: '1m' }] } } })
    const attempt = (options: object) => () => openTelemetryMetrics(limiter as Limiter, options)
    expect(attempt({ meterprovider: {} })).toThrow(/unknown option 'meterprovider'/)
    expect(attempt({ meterProvider: {} })).toThrow(/option meterProvider must be a MeterProvider/)
    expect(attempt({ spanAttributes: 'yes' })).toThrow(/option spanAttributes must be true or false, got yes/)
    expect(attempt({ maxRules: 1.5 })).toThrow(/maxRules must be an integer from 1 to 10000, got 1.5/)
  })
})

describe('openTelemetryMetrics: the active span', () => {
  const spans = new InMemorySpanExporter()
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }).getTracer('test')

  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  })
  afterAll(() => {
    context.disable()
  })

  it("sets the decision's rule, result and retry-after on the active span, and makes no span of its own", async () => {
    metrics = new CollectedMetrics()
    spans.reset()
    const clock = new ManualClock()
    limiter = createLimiter({
      store: new MemoryStore({ clock: clock.now }),
      rules: { login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '60s' }] } },
    })
    openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider })
    for (const name of ['first', 'second']) {
      await tracer.startActiveSpan(name, async (span) => {
        await (limiter as Limiter).consume('login', 'ip:203.0.113.7')
        span.end()
      })
    }
    // Outside any span: nothing to set, nothing made.
    await limiter.consume('login', 'ip:203.0.113.7')

    const finished = spans.getFinishedSpans()
    expect(finished.map((span) => [span.name, span.attributes])).toEqual([
      [
        'first',
        {
          'tollgate.rate_limiting.rule': 'login',
          'tollgate.rate_limiting.result': 'allowed',
          'tollgate.rate_limiting.retry_after': 0,
        },
      ],
      [
        'second',
        {
          'tollgate.rate_limiting.rule': 'login',
          'tollgate.rate_limiting.result': 'limited',
          'tollgate.rate_limiting.retry_after': 60 - (clock.nowMs % 60_000) / 1000,
        },
      ],
    ])
  })

  it('sets nothing with spanAttributes: false', async () => {
    metrics = new CollectedMetrics()
    spans.reset()
    limiter = createLimiter({ rules: { login: { windows: [{ limit: 1, period: '60s' }] } } })
    openTelemetryMetrics(limiter, { meterProvider: metrics.meterProvider, spanAttributes: false })
    await tracer.startActiveSpan('request', async (span) => {
      await (limiter as Limiter).consume('login', 'ip:203.0.113.7')
      span.end()
    })
    expect(spans.getFinishedSpans().map((span) => span.attributes)).toEqual([{}])
    expect(trace.getActiveSpan()).toBeUndefined()
  })
})
