import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import { DecisionCounts, type RuleCounts } from '../src/observe/metrics/decision-counts.js'
import { DECISION_OUTCOMES, decisionOutcome } from '../src/observe/metrics/outcomes.js'
import type { Decision } from '../src/rules/decision.js'
import type { Rule, WindowOptions } from '../src/rules/rules.js'
import type { DecisionObserver, StoreErrorKind } from '../src/store-calls/decision-observer.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store, StoreRequest } from '../src/stores/store.js'
import { TollgateArgumentError, TollgateConfigError, TollgateError } from '../src/support/errors.js'
import { collectedHeapUsed } from './heap-fixtures.js'

/** Keeps every call it gets: each decision with the time `timed` got just before it, or NaN. */
class Recorder implements DecisionObserver {
  readonly decisions: Array<{ rule: Rule; decision: Decision; seconds: number }> = []
  readonly failures: StoreErrorKind[] = []
  private time = Number.NaN

  constructor(readonly timeEvery = 0) {}

  decided(rule: Rule, decision: Decision): void {
    this.decisions.push({ rule, decision, seconds: this.time })
    this.time = Number.NaN
  }

  timed(seconds: number): void {
    expect(this.time, 'a second time before a decision').toBeNaN()
    this.time = seconds
  }

  storeFailed(kind: StoreErrorKind): void {
    this.failures.push(kind)
  }
}

const windows = [{ limit: 2, period: '1m' }] satisfies WindowOptions[]
/** A decision of the rule `api` that let one unit through, for counts shown decisions by hand. */
const allowedOnApi: Decision = {
  allowed: true,
  reason: 'ok',
  rule: 'api',
  cost: 1,
  retryAfterMs: 0,
  nowMs: 0,
  windows: [],
}
let limiter: Limiter | undefined

afterEach(async () => {
  await limiter?.close()
  limiter = undefined
})

describe('limiter.observe', () => {
  it('shows every consume decision to the observer, with its resolved rule, and neither peeks nor refunds', async () => {
    limiter = createLimiter({ rules: { api: { windows } } })
    const recorder = new Recorder()
    limiter.observe(recorder)
    const first = await limiter.consume('api', 'ip:a')
    await limiter.peek('api', 'ip:a')
    await limiter.refund('api', 'ip:a')
    const second = await limiter.consume('api', 'ip:a')

    expect(recorder.decisions.map(({ decision }) => decision)).toEqual([first, second])
    expect(recorder.decisions[0]?.rule).toBe(limiter.rules.get('api'))
    expect(recorder.decisions.every(({ seconds }) => Number.isNaN(seconds))).toBe(true)
  })

  it('stops showing decisions once detached, and a second detach does nothing', async () => {
    limiter = createLimiter({ rules: { api: { windows } } })
    const recorder = new Recorder()
    const detach = limiter.observe(recorder)
    await limiter.consume('api', 'ip:a')
    detach()
    detach()
    await limiter.consume('api', 'ip:a')
    expect(recorder.decisions).toHaveLength(1)
  })

  it('shows each decision to every observer, timed at the smallest timeEvery', async () => {
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 100, period: '1m' }] } } })
    const every3 = new Recorder(3)
    const never = new Recorder(0)
    const every5 = new Recorder(5)
    const untimed: Decision[] = []
    for (const recorder of [every3, never, every5]) limiter.observe(recorder)
    limiter.observe({ timeEvery: 0, decided: (_rule, decision) => untimed.push(decision), storeFailed: () => {} })
    for (let i = 0; i < 9; i++) await limiter.consume('api', 'ip:a')

    const timed = (recorder: Recorder) => recorder.decisions.map(({ seconds }) => !Number.isNaN(seconds))
    const expected = [false, false, true, false, false, true, false, false, true]
    expect(timed(every3)).toEqual(expected)
    expect(timed(never)).toEqual(expected)
    expect(timed(every5)).toEqual(expected)
    expect(every3.decisions.filter(({ seconds }) => seconds >= 0 && seconds < 1)).toHaveLength(3)
    expect(untimed).toEqual(every3.decisions.map(({ decision }) => decision))
  })

  it('times decisions on a store that answers later too', async () => {
    const memory = new MemoryStore()
    const store: Store = {
      evaluate: (request: StoreRequest) => memory.evaluate(request),
      reset: (targets) => memory.reset(targets),
      close: () => memory.close(),
    }
    limiter = createLimiter({ store, rules: { api: { windows } } })
    const recorder = new Recorder(1)
    limiter.observe(recorder)
    const decision = await limiter.consume('api', 'ip:a')
    expect(recorder.decisions).toEqual([{ rule: limiter.rules.get('api'), decision, seconds: expect.any(Number) }])
    expect(recorder.decisions[0]?.seconds).toBeGreaterThanOrEqual(0)
  })

  it('reports store failures by kind: unavailable, key, timeout, breaker_open', async () => {
    const failures: Record<string, () => Promise<never>> = {
      down: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')),
      broken: () => Promise.reject(new TollgateError('TG_STORE', 'unreadable state', { storeDown: false })),
      slow: () => new Promise<never>(() => {}),
    }
    const memory = new MemoryStore()
    const store: Store = {
      evaluate: (request: StoreRequest) =>
        // A target names the rule's state, `name@<digest of its shape>`.
        (failures[request.targets[0]?.rule.split('@')[0] ?? ''] ?? (() => memory.evaluate(request)))(),
      reset: (targets) => memory.reset(targets),
      close: () => memory.close(),
    }
    limiter = createLimiter({
      store,
      rules: { down: { windows }, broken: { windows }, slow: { windows } },
      breaker: { failureThreshold: 2, probeAfterMs: 60_000 },
      onWarning: () => {},
    })
    const recorder = new Recorder()
    limiter.observe(recorder)
    await limiter.consume('down', 'ip:a')
    await limiter.consume('broken', 'ip:a')
    await limiter.consume('slow', 'ip:a', { storeTimeoutMs: 1 })
    expect(limiter.breakerState).toBe('open')
    await limiter.consume('down', 'ip:a')

    expect(recorder.failures).toEqual(['unavailable', 'key', 'timeout', 'breaker_open'])
    expect(recorder.decisions.map(({ decision }) => decision.reason)).toEqual([
      'store-error-allowed',
      'store-error-allowed',
      'store-error-allowed',
      'store-error-allowed',
    ])
  })

  it('refuses what is not an observer, and the same observer twice', () => {
    limiter = createLimiter({ rules: { api: { windows } } })
    const observe = (observer: unknown) => () => (limiter as Limiter).observe(observer as DecisionObserver)
    expect(observe({ decided() {} })).toThrow(TollgateArgumentError)
    expect(observe({ decided() {} })).toThrow(/decided and storeFailed methods, .* got \{\}/)
    expect(observe({ decided() {}, storeFailed() {}, timeEvery: 0.5 })).toThrow(
      /timeEvery must be a whole number ≥ 0 .*got 0\.5/,
    )
    expect(observe({ decided() {}, storeFailed() {}, timeEvery: 10 })).toThrow(
      /timeEvery 10 needs a timed\(seconds\) method .*got undefined/,
    )
    const recorder = new Recorder()
    limiter.observe(recorder)
    expect(observe(recorder)).toThrow(/attached already/)
  })

  it('rejects the decision when the observer throws, as a store-error listener would', async () => {
    limiter = createLimiter({ rules: { api: { windows } } })
    limiter.observe({
      timeEvery: 0,
      decided: () => {
        throw new Error('observer failed')
      },
      storeFailed: () => {},
    })
    await expect(limiter.consume('api', 'ip:a')).rejects.toThrow('observer failed')
  })
})

describe('DecisionCounts', () => {
  it('keeps counts per rule by outcome, units by outcome, and store failures by kind', async () => {
    limiter = createLimiter({ rules: { api: { windows } }, onWarning: () => {} })
    const counts = new DecisionCounts({ timeEvery: 0 })
    limiter.observe(counts)
    await limiter.consume('api', 'ip:a', { cost: 2 })
    await limiter.consume('api', 'ip:a')
    counts.storeFailed('sync')

    const [api] = [...counts.rules()]
    expect(api?.rule).toBe('api')
    expect([...(api?.decisions ?? [])]).toEqual([1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    expect([...(api?.units ?? [])]).toEqual([2, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    expect(api?.windows).toEqual([{ window: '60s', denials: 1 }])
    expect(counts.storeErrors).toEqual({ timeout: 0, unavailable: 0, key: 0, breaker_open: 0, sync: 1 })
    expect(counts.durations.count).toBe(0)
  })

  it('counts alike when two counts observe one limiter, or its rules are frozen, and leaves the rules as they read', async () => {
    const rules = { api: { windows }, login: { windows } }
    limiter = createLimiter({ rules })
    const first = new DecisionCounts()
    const second = new DecisionCounts()
    limiter.observe(first)
    limiter.observe(second)
    const api = limiter.rules.get('api') as Rule
    const keys = Object.keys(api)
    Object.freeze(limiter.rules.get('login'))
    for (const rule of ['api', 'login', 'api', 'login', 'api'] as const) await limiter.consume(rule, 'ip:a')

    const allowed = (counts: DecisionCounts) =>
      Object.fromEntries([...counts.rules()].map((rule) => [rule.rule, [...rule.decisions.slice(0, 2)]]))
    expect(allowed(first)).toEqual({ api: [2, 1], login: [2, 0] })
    expect(allowed(second)).toEqual(allowed(first))
    expect(Object.keys(api)).toEqual(keys)
    expect(Object.getOwnPropertySymbols({ ...api })).toEqual([])
  })

  it("reads a store's totals by state name as its rule's, remembering the last 10,000 state names", () => {
    const counts = new DecisionCounts()
    // A live rule whose shape changed keeps its state under name@digest; each publish that
    // reshapes it makes a new one.
    const reshaped = (stateName: string): Rule => {
      const rule = { name: 'api', stateName, windows: [], chain: [] as Rule[] } as unknown as Rule
      ;(rule.chain as Rule[]).push(rule)
      return rule
    }
    for (let i = 0; i <= 10_000; i++) counts.decided(reshaped(`api@${i}`), allowedOnApi)
    expect(
      counts.totalsByRule([
        ['api@10000', 3],
        ['api@1', 4],
        ['api@0', 5],
        ['other', 6],
      ]),
    ).toEqual(
      new Map([
        ['api', 7],
        ['api@0', 5],
        ['other', 6],
      ]),
    )
  })

  it('labels rules past maxRules __other__, and gives other metrics the same labels', () => {
    const counts = new DecisionCounts({ maxRules: 2 })
    expect(['a', 'b', 'c', 'a', '__other__'].map((name) => counts.ruleLabel(name))).toEqual([
      'a',
      'b',
      '__other__',
      'a',
      '__other__',
    ])
  })

  it('keeps every rule label its own counts, however many there are, and two counts on one rule apart', async () => {
    const names = Array.from({ length: 40 }, (_, i) => `rule${i}`)
    limiter = createLimiter({
      rules: Object.fromEntries(names.map((name) => [name, { windows: [{ limit: 3, period: '1m' }] }])),
    })
    const counts = new DecisionCounts()
    const other = new DecisionCounts()
    limiter.observe(counts)
    // Rule i decides i % 5 + 1 times on a fresh identifier, then 4 more on one: 3 allowed, 1 limited.
    for (const [i, name] of names.entries()) {
      for (let n = 0; n <= i % 5; n++) await limiter.consume(name, `ip:${i}.${n}`, { cost: 2 })
      if (i === 20) limiter.observe(other)
      for (let n = 0; n < 4; n++) await limiter.consume(name, 'ip:same')
    }
    const byRule = new Map([...counts.rules()].map((rule) => [rule.rule, rule]))
    expect([...byRule.keys()]).toEqual(names)
    for (const [i, name] of names.entries()) {
      const rule = byRule.get(name) as RuleCounts
      expect([...rule.decisions.slice(0, 2)]).toEqual([(i % 5) + 1 + 3, 1])
      expect([...rule.units.slice(0, 2)]).toEqual([2 * ((i % 5) + 1) + 3, 1])
    }
    // Attached after rule 20's first decisions: it saw that rule's last four and all of the later rules'.
    const seen = new Map([...other.rules()].map((rule) => [rule.rule, [...rule.decisions.slice(0, 2)]]))
    expect(seen.get('rule20')).toEqual([3, 1])
    expect(seen.get('rule39')).toEqual([(39 % 5) + 1 + 3, 1])
    expect(seen.has('rule19')).toBe(false)
  })

  it('counts each allowed decision once, however often and whenever the counts are read', async () => {
    limiter = createLimiter({ rules: { api: { windows: [{ limit: 100, period: '1m' }] } } })
    const counts = new DecisionCounts({ timeEvery: 0 })
    limiter.observe(counts)
    const allowed = () => [...counts.rules()].map((rule) => [rule.decisions[0], rule.units[0]])
    for (let i = 0; i < 3; i++) await limiter.consume('api', 'ip:a', { cost: 2 })
    expect(allowed()).toEqual([[3, 6]])
    await limiter.consume('api', 'ip:a')
    expect(allowed()).toEqual([[4, 7]])
    expect(allowed()).toEqual([[4, 7]])
  })

  // Each publish of live rules makes new rule objects: the counts of those replaced must stay
  // counted, and what counted them must go with them.
  it('keeps what replaced rules counted, and holds nothing for them once they are gone', async () => {
    const counts = new DecisionCounts({ timeEvery: 0 })
    const ruleOfLoad = (): Rule => {
      const rule = { name: 'api', stateName: 'api', windows: [{ limit: 2, periodMs: 60_000 }], chain: [] as Rule[] }
      rule.chain.push(rule as unknown as Rule)
      return rule as unknown as Rule
    }
    const loads = async (n: number) => {
      for (let i = 1; i <= n; i++) {
        counts.decided(ruleOfLoad(), allowedOnApi)
        if (i % 1_000 === 0) {
          await new Promise((resolve) => setImmediate(resolve))
          counts.rules()
        }
      }
    }
    await loads(2_000)
    const before = await collectedHeapUsed()
    await loads(20_000)
    await collectedHeapUsed()
    counts.rules()
    const grown = (await collectedHeapUsed()) - before
    expect([...counts.rules()].map((rule) => rule.decisions[0])).toEqual([22_000])
    // A slot held for each of 20,000 rules comes to over 4 MB.
    expect(grown).toBeLessThan(2 ** 20)
  })

  it('counts timed decisions in buckets, each time in the first bucket it fits', () => {
    const counts = new DecisionCounts({ durationBuckets: [0.001, 0.01] })
    const rule = createLimiter({ rules: { api: { windows } } }).rules.get('api') as Rule
    for (const seconds of [0.0005, 0.001, 0.005, 0.5]) {
      counts.timed(seconds)
      counts.decided(rule, allowedOnApi)
    }
    expect([...counts.durations.counts]).toEqual([2, 1, 1])
    expect(counts.durations.count).toBe(4)
    expect(counts.durations.sum).toBeCloseTo(0.5065, 10)
  })

  it('refuses bad options, naming the option and the value', () => {
    expect(() => new DecisionCounts({ maxRules: 0 })).toThrow(TollgateConfigError)
    expect(() => new DecisionCounts({ maxRules: 10_001 })).toThrow(
      /maxRules must be an integer from 1 to 10000, got 10001/,
    )
    expect(() => new DecisionCounts({ timeEvery: Number.NaN })).toThrow(/timeEvery .* got NaN/)
    expect(() => new DecisionCounts({ durationBuckets: [] })).toThrow(/durationBuckets .* got \[\]/)
    expect(() => new DecisionCounts({ durationBuckets: [0, 1] })).toThrow(/durationBuckets .* got \[0,1\]/)
    expect(() => new DecisionCounts({ maxrules: 5 } as object)).toThrow(/unknown option 'maxrules'/)
  })
})

describe('decisionOutcome', () => {
  it('labels every reason with its outcome, in DECISION_OUTCOMES order', () => {
    const reasons = [
      'ok',
      'limited',
      'shed',
      'dry-run',
      'store-error-allowed',
      'store-error-denied',
      'local-fallback',
      'degraded-local',
      'overloaded',
      'blocked',
    ] as const
    expect(reasons.map(decisionOutcome)).toEqual([...DECISION_OUTCOMES])
  })
})
