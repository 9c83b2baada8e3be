import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  createLimiter,
  MemoryStore,
  type RulesOptions,
  type Store,
  type StoreRequest,
  TollgateConfigError,
  TollgateError,
} from '../src/index.js'
import { type BreakerChange, breakerSettingsOf, CircuitBreaker } from '../src/store-calls/circuit-breaker.js'

describe('CircuitBreaker', () => {
  let now = 0
  let changes: BreakerChange[]
  const make = (options = {}) =>
    new CircuitBreaker(
      breakerSettingsOf(options),
      (change) => changes.push(change),
      () => now,
    )
  beforeEach(() => {
    now = 0
    changes = []
  })

  it('opens after the threshold of consecutive failures, and a success in between resets the count', () => {
    const breaker = make({ failureThreshold: 3 })
    breaker.failure(new Error('1'))
    breaker.failure(new Error('2'))
    breaker.success()
    breaker.failure(new Error('1'))
    breaker.failure(new Error('2'))
    expect(breaker.current).toBe('closed')
    breaker.failure(new Error('3'))
    expect(breaker.current).toBe('open')
    expect(changes).toEqual([{ state: 'open', previous: 'closed', error: new Error('3') }])
    expect(breaker.tryAcquire()).toBe(false)
  })

  it('lets exactly one probe through after probeAfterMs, and closes or reopens on its answer', () => {
    const breaker = make({ failureThreshold: 1, probeAfterMs: 500 })
    breaker.failure(new Error('down'))
    now = 499
    expect(breaker.tryAcquire()).toBe(false)
    now = 500
    expect(breaker.tryAcquire()).toBe(true)
    expect(breaker.current).toBe('half-open')
    expect(breaker.tryAcquire()).toBe(false)
    breaker.failure(new Error('still down'))
    expect(breaker.current).toBe('open')
    now = 999
    expect(breaker.tryAcquire()).toBe(false)
    now = 1000
    expect(breaker.tryAcquire()).toBe(true)
    breaker.success()
    expect(breaker.current).toBe('closed')
    expect(changes.map((c) => `${c.previous}→${c.state}`)).toEqual([
      'closed→open',
      'open→half-open',
      'half-open→open',
      'open→half-open',
      'half-open→closed',
    ])
  })

  it('neither counts nor resets on an inconclusive call, and hands a probe on to the next call', () => {
    const breaker = make({ failureThreshold: 2, probeAfterMs: 500 })
    breaker.failure(new Error('1'))
    breaker.inconclusive()
    expect(breaker.current).toBe('closed')
    breaker.failure(new Error('2'))
    expect(breaker.current).toBe('open')
    now = 500
    expect(breaker.tryAcquire()).toBe(true)
    breaker.inconclusive()
    expect(breaker.current).toBe('half-open')
    expect(breaker.tryAcquire()).toBe(true)
    expect(breaker.tryAcquire()).toBe(false)
    breaker.success()
    expect(breaker.current).toBe('closed')
  })

  it.each([
    [{ failureThreshold: 0 }, 'failureThreshold must be an integer from 1 to 1000, got 0'],
    [{ probeAfterMs: 1.5 }, 'probeAfterMs must be an integer from 1 to 60000, got 1.5'],
    [{ probeAfter: 5 }, "unknown option 'probeAfter'"],
  ])('refuses %j', (options, message) => {
    expect(() => make(options)).toThrow(TollgateConfigError)
    expect(() => make(options)).toThrow(message)
  })
})

/**
 * A store that fails while `down` is set, and fails the decisions of identifiers in `broken` on
 * their own: a real failing dependency, not a stand-in for Redis.
 */
class SwitchableStore implements Store {
  down = false
  calls = 0
  readonly broken = new Set<string>()
  private readonly inner = new MemoryStore({ clock: () => 1_700_000_000_000, sweepIntervalMs: 0 })
  evaluate(request: StoreRequest) {
    this.calls++
    if (this.down) return Promise.reject(new Error('connection refused'))
    const broken = request.targets.find((target) => this.broken.has(target.identifier))
    if (broken) {
      const error = new TollgateError('TG_STORE', `state of ${broken.identifier} is unreadable`, { storeDown: false })
      return Promise.reject(error)
    }
    return this.inner.evaluate(request)
  }
  reset() {
    return Promise.resolve()
  }
  close() {
    return this.inner.close()
  }
}

describe('a limiter whose store fails', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['performance', 'setTimeout', 'clearTimeout', 'Date'] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })
  const rules = {
    login: { windows: [{ limit: 2, period: '1m' }], onStoreError: 'deny' },
    api: { windows: [{ limit: 2, period: '1m' }] },
  } satisfies RulesOptions

  it('stops calling the store once the breaker opens, probes, and recovers when the store answers', async () => {
    const store = new SwitchableStore()
    const limiter = createLimiter({ store, rules, breaker: { failureThreshold: 2, probeAfterMs: 500 } })
    const changes: string[] = []
    limiter.on('breaker', (change) => changes.push(change.state))
    const errors: string[] = []
    limiter.on('store-error', (error) => errors.push(error.code))
    store.down = true
    for (let i = 0; i < 5; i++) expect((await limiter.consume('api', 'a')).reason).toBe('store-error-allowed')
    // Two failures opened it; three more decisions answered without touching the store.
    expect(store.calls).toBe(2)
    expect(limiter.breakerState).toBe('open')
    store.down = false
    vi.advanceTimersByTime(500)
    expect((await limiter.consume('api', 'a')).reason).toBe('ok')
    expect(limiter.breakerState).toBe('closed')
    expect(changes).toEqual(['open', 'half-open', 'closed'])
    expect(errors).toEqual(['TG_STORE', 'TG_STORE'])
    await limiter.close()
  })

  // Regression: one identifier's unreadable state failed its decisions, and after three of them
  // the breaker opened for every identifier.
  it("counts no failure its store marks as the decision's own, and resets no count for it", async () => {
    const store = new SwitchableStore()
    store.broken.add('broken')
    const limiter = createLimiter({ store, rules, breaker: { failureThreshold: 3 } })
    const changes: string[] = []
    limiter.on('breaker', (change) => changes.push(change.state))
    const errors: Array<boolean | undefined> = []
    limiter.on('store-error', (error) => errors.push(error.storeDown))
    for (let i = 0; i < 10; i++) {
      expect(await limiter.consume('login', 'broken')).toMatchObject({
        reason: 'store-error-denied',
        error: { storeDown: false, message: 'state of broken is unreadable' },
      })
    }
    expect((await limiter.consume('api', 'a')).reason).toBe('ok')
    expect(limiter.breakerState).toBe('closed')
    // Two outage failures, a decision's own between them and the third: the breaker opens.
    store.down = true
    await limiter.consume('api', 'a')
    await limiter.consume('api', 'a')
    store.down = false
    await limiter.consume('api', 'broken')
    expect(limiter.breakerState).toBe('closed')
    store.down = true
    await limiter.consume('api', 'a')
    expect(limiter.breakerState).toBe('open')
    expect(changes).toEqual(['open'])
    expect(errors).toEqual([...Array(10).fill(false), undefined, undefined, false, undefined])
    await limiter.close()
  })

  it("takes the rule's policy over the limiter's, and the call's over both", async () => {
    const store = new SwitchableStore()
    const limiter = createLimiter({ store, rules, breaker: { failureThreshold: 1000 } })
    store.down = true
    expect((await limiter.consume('api', 'a')).reason).toBe('store-error-allowed')
    expect((await limiter.consume('login', 'a')).reason).toBe('store-error-denied')
    expect((await limiter.consume('login', 'a', { onStoreError: 'allow' })).reason).toBe('store-error-allowed')
    await limiter.close()
  })

  it("with 'local', counts on an in-process store until the store is back, then forgets those counts", async () => {
    const store = new SwitchableStore()
    const limiter = createLimiter({
      store,
      rules,
      onStoreError: 'local',
      breaker: { failureThreshold: 1, probeAfterMs: 100 },
    })
    await limiter.consume('api', 'a')
    store.down = true
    const during = [
      await limiter.consume('api', 'a'),
      await limiter.consume('api', 'a'),
      await limiter.consume('api', 'a'),
    ]
    expect(during.map((d) => [d.reason, d.allowed, d.windows[0]?.remaining])).toEqual([
      ['local-fallback', true, 1],
      ['local-fallback', true, 0],
      ['local-fallback', false, 0],
    ])
    expect(during[0]?.error).toMatchObject({ code: 'TG_STORE' })
    store.down = false
    vi.advanceTimersByTime(100)
    // The shared store saw one charge before the outage; the local ones stay local.
    expect((await limiter.consume('api', 'a')).windows[0]?.remaining).toBe(0)
    store.down = true
    vi.advanceTimersByTime(100)
    await limiter.consume('api', 'b')
    vi.advanceTimersByTime(100)
    // A new outage starts the local counts afresh.
    expect((await limiter.consume('api', 'a')).windows[0]?.remaining).toBe(1)
    await limiter.close()
  })

  it('rejects refund and reset at once while the breaker is open', async () => {
    const store = new SwitchableStore()
    const limiter = createLimiter({ store, rules, breaker: { failureThreshold: 1 } })
    store.down = true
    await limiter.consume('api', 'a')
    const calls = store.calls
    await expect(limiter.refund('api', 'a')).rejects.toMatchObject({
      code: 'TG_STORE',
      message: /circuit breaker is open/,
    })
    expect(store.calls).toBe(calls)
    await limiter.close()
  })
})
