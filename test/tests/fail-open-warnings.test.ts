import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  RedisStore,
  type RulesOptions,
  type Store,
  type StoreRequest,
  type StoreResult,
  TollgateError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { waitReady } from '../src/redis-cluster.js'
import { spawnRedisServer } from '../src/redis-server.js'

const T = 1_763_712_000_000
const IP = 'ip:203.0.113.7'
const RULES: RulesOptions = {
  api: { windows: [{ limit: 100, period: '1m' }] },
  login: { windows: [{ limit: 100, period: '1m' }], onStoreError: 'deny' },
  search: { windows: [{ limit: 100, period: '1m' }], onStoreError: 'local' },
}

/**
 * A store whose failures the test switches on and off: a real in-process store behind it, and
 * either every call failing (`down`) or only those of the identifiers in `broken`, on their own.
 */
class SwitchableStore implements Store {
  down = false
  readonly broken = new Set<string>()
  private readonly inner = new MemoryStore({ clock: () => T, sweepIntervalMs: 0 })

  evaluate(request: StoreRequest): Promise<StoreResult> {
    if (this.down) return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'))
    const broken = request.targets.find((target) => this.broken.has(target.identifier))
    if (broken) {
      return Promise.reject(
        new TollgateError('TG_STORE', `state of ${broken.identifier} is unreadable`, { storeDown: false }),
      )
    }
    return this.inner.evaluate(request)
  }

  reset(): Promise<void> {
    return this.down ? Promise.reject(new Error('connect ECONNREFUSED')) : Promise.resolve()
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}

/** The same, answering at once as an in-process store does. */
class SwitchableSyncStore extends SwitchableStore {
  private readonly sync = new MemoryStore({ clock: () => T, sweepIntervalMs: 0 })

  evaluateSync(request: StoreRequest): StoreResult {
    if (this.down) throw new Error('the shared memory segment is gone')
    return this.sync.evaluateSync(request)
  }
}

const opened: Limiter[] = []

afterEach(async () => {
  await Promise.all(opened.splice(0).map((limiter) => limiter.close()))
})

function limiterOver(store: Store, options: Partial<LimiterOptions> = {}) {
  const warnings: Array<{ code: string; message: string }> = []
  const limiter = createLimiter({
    store,
    rules: RULES,
    // A breaker that never opens here: each decision asks the store.
    breaker: { failureThreshold: 1000 },
    onWarning: (message, code) => warnings.push({ code, message }),
    ...options,
  })
  opened.push(limiter)
  return { limiter, warnings, codes: () => warnings.map((w) => w.code) }
}

// Regression: under the default onStoreError 'allow', a dead store let every request through
// and nothing said so unless the application listened to 'store-error'.
describe('decisions failing open', () => {
  it('warn once when they start, and once when the store answers again', async () => {
    const store = new SwitchableStore()
    const { limiter, warnings, codes } = limiterOver(store)
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    expect(warnings).toEqual([])

    store.down = true
    for (let i = 0; i < 5; i++) expect((await limiter.consume('api', IP)).reason).toBe('store-error-allowed')
    expect(codes()).toEqual(['TG_STORE_FAILING_OPEN'])
    expect(warnings[0]?.message).toContain('decisions are failing open: the store failed: connect ECONNREFUSED')
    expect(warnings[0]?.message).toContain("onStoreError 'allow'")
    expect(warnings[0]?.message).toContain("'store-error'")

    store.down = false
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    expect(codes()).toEqual(['TG_STORE_FAILING_OPEN', 'TG_STORE_RECOVERED'])
    expect(warnings[1]?.message).toBe(
      'the store answers again: decisions are limited again, after 5 decisions failed open',
    )

    store.down = true
    await limiter.peek('api', IP)
    store.down = false
    await limiter.peek('api', IP)
    expect(codes()).toEqual([
      'TG_STORE_FAILING_OPEN',
      'TG_STORE_RECOVERED',
      'TG_STORE_FAILING_OPEN',
      'TG_STORE_RECOVERED',
    ])
  })

  it('stay silent when the application listens to store-error', async () => {
    const store = new SwitchableStore()
    const { limiter, warnings } = limiterOver(store)
    const heard: string[] = []
    limiter.on('store-error', (error) => heard.push(error.message))
    store.down = true
    await limiter.consume('api', IP)
    store.down = false
    await limiter.consume('api', IP)
    expect(heard).toHaveLength(1)
    expect(warnings).toEqual([])
  })

  it('warn when the application stopped listening before the failure', async () => {
    const store = new SwitchableStore()
    const { limiter, codes } = limiterOver(store)
    const listener = () => {}
    limiter.on('store-error', listener)
    limiter.off('store-error', listener)
    store.down = true
    await limiter.consume('api', IP)
    expect(codes()).toEqual(['TG_STORE_FAILING_OPEN'])
  })

  it("do not include decisions that fail closed or locally: those are 'deny' and 'local'", async () => {
    const store = new SwitchableStore()
    const { limiter, warnings } = limiterOver(store)
    store.down = true
    expect((await limiter.consume('login', IP)).reason).toBe('store-error-denied')
    expect((await limiter.consume('search', IP)).reason).toBe('local-fallback')
    expect((await limiter.consume('api', IP, { onStoreError: 'deny' })).reason).toBe('store-error-denied')
    expect(warnings).toEqual([])
    expect((await limiter.consume('login', IP, { onStoreError: 'allow' })).reason).toBe('store-error-allowed')
    expect(warnings.map((w) => w.code)).toEqual(['TG_STORE_FAILING_OPEN'])
  })

  it("do not include one decision's own failure, which says nothing of the store", async () => {
    const store = new SwitchableStore()
    const { limiter, warnings } = limiterOver(store)
    store.broken.add('user:broken')
    expect((await limiter.consume('api', 'user:broken')).reason).toBe('store-error-allowed')
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    expect(warnings).toEqual([])
  })

  it('include decisions the open breaker takes without asking the store, warned once', async () => {
    const store = new SwitchableStore()
    const { limiter, codes } = limiterOver(store, { breaker: { failureThreshold: 1, probeAfterMs: 60_000 } })
    store.down = true
    await limiter.consume('api', IP)
    expect(limiter.breakerState).toBe('open')
    const decision = await limiter.consume('api', IP)
    expect(decision.error?.message).toContain('circuit breaker is open')
    expect(codes()).toEqual(['TG_STORE_FAILING_OPEN'])
  })

  it('are told of an in-process store too', async () => {
    const store = new SwitchableSyncStore()
    const { limiter, codes } = limiterOver(store)
    store.down = true
    expect((await limiter.consume('api', IP)).reason).toBe('store-error-allowed')
    expect((await limiter.consume('api', IP)).reason).toBe('store-error-allowed')
    store.down = false
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    expect(codes()).toEqual(['TG_STORE_FAILING_OPEN', 'TG_STORE_RECOVERED'])
  })

  it('go to process.emitWarning with their code by default', async () => {
    const store = new SwitchableStore()
    const limiter = createLimiter({ store, rules: RULES })
    opened.push(limiter)
    const warned = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve))
    store.down = true
    await limiter.consume('api', IP)
    const warning = await warned
    expect(warning.code).toBe('TG_STORE_FAILING_OPEN')
    expect(warning.message).toContain('decisions are failing open')
  })
})

// Regression: under the default onStoreError 'allow', a dead Redis let every request through
// without a word unless the application listened to 'store-error'.
describe('a Redis that dies and comes back, under the default policy', () => {
  const started: Array<() => Promise<unknown>> = []

  afterEach(async () => {
    for (const stop of started.splice(0).reverse()) await stop().catch(() => {})
  })

  it('warns once as decisions start failing open and once when Redis answers again, unless store-error is heard', async () => {
    const server = await spawnRedisServer()
    started.push(() => server.stop())
    // Fail fast while Redis is gone: each decision fails at once instead of at its bound.
    const client = new Redis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false })
    started.push(async () => client.disconnect())
    client.on('error', () => {})
    await waitReady(client)

    function limiterWith(warnings: string[]): Limiter {
      const limiter = createLimiter({
        store: new RedisStore({ client, prefix: 'fail-open:' }),
        rules: RULES,
        // A breaker that stays closed: every decision asks Redis, the first after its return included.
        breaker: { failureThreshold: 1000 },
        onWarning: (message, code) => warnings.push(`${code}: ${message}`),
      })
      started.push(() => limiter.close())
      return limiter
    }
    const warned: string[] = []
    const unheard = limiterWith(warned)
    const heardWarnings: string[] = []
    const heard = limiterWith(heardWarnings)
    const heardErrors: string[] = []
    heard.on('store-error', (error) => heardErrors.push(error.message))

    expect((await unheard.consume('api', IP)).reason).toBe('ok')
    expect((await heard.consume('api', IP)).reason).toBe('ok')

    server.kill('SIGKILL')
    await server.stop()
    for (let i = 0; i < 5; i++) {
      expect((await unheard.consume('api', IP)).reason).toBe('store-error-allowed')
      expect((await heard.consume('api', IP)).reason).toBe('store-error-allowed')
    }
    expect(warned).toHaveLength(1)
    expect(warned[0]).toMatch(/^TG_STORE_FAILING_OPEN: decisions are failing open: /)

    // Not events.once: it rejects on the 'error' each refused reconnection emits meanwhile.
    const ready = new Promise((resolve) => client.once('ready', resolve))
    const restarted = await spawnRedisServer({ port: server.port })
    started.push(() => restarted.stop())
    await ready
    expect((await unheard.consume('api', IP)).reason).toBe('ok')
    expect((await heard.consume('api', IP)).reason).toBe('ok')
    expect(warned).toHaveLength(2)
    expect(warned[1]).toBe(
      'TG_STORE_RECOVERED: the store answers again: decisions are limited again, after 5 decisions failed open',
    )

    expect(heardErrors).toHaveLength(5)
    expect(heardWarnings).toEqual([])
  }, 30_000)
})
