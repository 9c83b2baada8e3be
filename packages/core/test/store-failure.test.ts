import { afterEach, describe, expect, it, vi } from 'vitest'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import type { LimiterOptions } from '../src/limiter/limiter-config.js'
import type { RulesOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store, StoreReceiver, StoreRequest, StoreResult } from '../src/stores/store.js'
import { TollgateArgumentError, TollgateConfigError, TollgateError } from '../src/support/errors.js'

const T = 1_763_712_000_000
const RULES: RulesOptions = { api: { windows: [{ limit: 5, period: '1m' }] } }
const IP = 'ip:203.0.113.7'

const opened: Limiter[] = []

afterEach(async () => {
  vi.useRealTimers()
  await Promise.all(opened.splice(0).map((limiter) => limiter.close()))
})

function limiterOver(store: Store, options: Partial<LimiterOptions> = {}): Limiter {
  const limiter = createLimiter({ store, rules: RULES, onWarning: () => {}, ...options })
  opened.push(limiter)
  return limiter
}

const refused = new Error('connect ECONNREFUSED 127.0.0.1:6379')

function rejectingStore(cause: unknown = refused): Store {
  return {
    evaluate: () => Promise.reject(cause),
    reset: () => Promise.reject(cause),
    close: () => Promise.resolve(),
  }
}

/** A store whose every call waits until the test settles it, as a partitioned network would. */
function silentStore() {
  const pending: Array<{ resolve: (value: never) => void; reject: (error: unknown) => void }> = []
  const hang = <V>() =>
    new Promise<V>((resolve, reject) => {
      pending.push({ resolve: resolve as (value: never) => void, reject })
    })
  const store: Store = {
    evaluate: () => hang<StoreResult>(),
    reset: () => hang<void>(),
    close: () => Promise.resolve(),
  }
  return { store, pending }
}

async function settlesWithin<V>(promise: Promise<V>, ms: number): Promise<V> {
  let settled = false
  promise.then(
    () => {
      settled = true
    },
    () => {
      settled = true
    },
  )
  await vi.advanceTimersByTimeAsync(ms - 1)
  expect(settled).toBe(false)
  await vi.advanceTimersByTimeAsync(1)
  expect(settled).toBe(true)
  return promise
}

describe('a store that rejects', () => {
  it.each(['consume', 'peek'] as const)('%s fails open by default: store-error-allowed, no windows', async (op) => {
    const decision = await limiterOver(rejectingStore())[op]('api', IP)
    expect(decision).toEqual({
      allowed: true,
      reason: 'store-error-allowed',
      rule: 'api',
      cost: 1,
      retryAfterMs: 0,
      nowMs: expect.any(Number),
      windows: [],
      error: expect.any(TollgateError),
    })
    expect(decision.error).toMatchObject({
      code: 'TG_STORE',
      message: 'the store failed: connect ECONNREFUSED 127.0.0.1:6379',
      cause: refused,
    })
  })

  it.each(['consume', 'peek'] as const)(
    "%s fails closed with onStoreError 'deny': store-error-denied, retry in 1 s",
    async (op) => {
      const decision = await limiterOver(rejectingStore(), { onStoreError: 'deny' })[op]('api', IP, { cost: 3 })
      expect(decision).toMatchObject({
        allowed: false,
        reason: 'store-error-denied',
        rule: 'api',
        cost: 3,
        retryAfterMs: 1_000,
        windows: [],
        error: { code: 'TG_STORE', cause: refused },
      })
    },
  )

  it('takes the policy per call over the limiter', async () => {
    const allowing = limiterOver(rejectingStore())
    const denying = limiterOver(rejectingStore(), { onStoreError: 'deny' })
    expect((await allowing.consume('api', IP, { onStoreError: 'deny' })).reason).toBe('store-error-denied')
    expect((await allowing.peek('api', IP, { onStoreError: 'deny' })).reason).toBe('store-error-denied')
    expect((await denying.consume('api', IP, { onStoreError: 'allow' })).reason).toBe('store-error-allowed')
    expect((await denying.consume('api', IP)).reason).toBe('store-error-denied')
  })

  it('answers a store failure, not dry-run, when dryRun is asked', async () => {
    const decision = await limiterOver(rejectingStore(), { onStoreError: 'deny' }).consume('api', IP, { dryRun: true })
    expect(decision.reason).toBe('store-error-denied')
  })

  it('answers a dry run decided on the local fallback with retryAfterMs 0', async () => {
    const limiter = limiterOver(rejectingStore(), { onStoreError: 'local' })
    for (let i = 0; i < 5; i++) await limiter.consume('api', IP)
    const decision = await limiter.consume('api', IP, { dryRun: true })
    expect(decision).toMatchObject({ allowed: true, reason: 'dry-run', retryAfterMs: 0 })
    expect(decision.windows[0]).toMatchObject({ failed: true, remaining: 0 })
  })

  it('wraps a rejection that is not an Error', async () => {
    const decision = await limiterOver(rejectingStore('READONLY')).consume('api', IP)
    expect(decision.error).toMatchObject({ code: 'TG_STORE', message: 'the store failed: READONLY', cause: 'READONLY' })
  })

  it('passes a TollgateError from the store through as it is', async () => {
    const own = new TollgateError('TG_STORE', 'the store answered a malformed reply')
    expect((await limiterOver(rejectingStore(own)).consume('api', IP)).error).toBe(own)
  })

  it('treats an answer with too few windows as a store failure', async () => {
    const short: Store = {
      evaluate: async () => ({ allowed: true, nowMs: T, windows: [] }),
      reset: async () => {},
      close: async () => {},
    }
    const decision = await limiterOver(short).consume('api', IP)
    expect(decision).toMatchObject({
      reason: 'store-error-allowed',
      error: { code: 'TG_STORE', message: 'the store answered fewer windows than the decision holds' },
    })
  })

  it('still rejects for a caller mistake rather than blaming the store', async () => {
    const limiter = limiterOver(rejectingStore())
    await expect(limiter.consume('nope', IP)).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE' })
    await expect(limiter.consume('api', [])).rejects.toBeInstanceOf(TypeError)
    await expect(limiter.consume('api', IP, { cost: -1 })).rejects.toBeInstanceOf(TypeError)
  })

  // Regression: refund passed the store's own error through without TG_STORE.
  it('refund rejects with TG_STORE', async () => {
    await expect(limiterOver(rejectingStore()).refund('api', IP)).rejects.toMatchObject({ code: 'TG_STORE' })
  })

  // Regression: reset did the same.
  it('reset rejects with TG_STORE', async () => {
    await expect(limiterOver(rejectingStore()).reset('api', IP)).rejects.toMatchObject({ code: 'TG_STORE' })
  })

  it('refund and reset reject rather than answer a policy decision', async () => {
    const limiter = limiterOver(rejectingStore(), { onStoreError: 'allow' })
    await expect(limiter.refund('api', IP)).rejects.toThrow('ECONNREFUSED')
    await expect(limiter.reset('api', IP)).rejects.toThrow('ECONNREFUSED')
  })

  // Regression: a store throwing synchronously made consume reject.
  it('consume answers store-error-allowed when evaluate throws synchronously', async () => {
    const throwing: Store = {
      evaluate: () => {
        throw new Error('not connected')
      },
      reset: async () => {},
      close: async () => {},
    }
    expect((await limiterOver(throwing).consume('api', IP)).reason).toBe('store-error-allowed')
  })

  it("rejects with the error of a 'store-error' listener that throws, and still closes", async () => {
    const limiter = limiterOver(rejectingStore())
    const mistake = new Error('listener bug')
    limiter.on('store-error', () => {
      throw mistake
    })
    await expect(limiter.consume('api', IP)).rejects.toBe(mistake)
    await limiter.close()
  })

  // Regression: on an in-process store the listener's error escaped consume as a throw, not a rejection.
  it("rejects, never throws, with the error of a 'store-error' listener on an in-process store", async () => {
    // A clock that goes bad after construction, which is when a clock returning no time is refused.
    let time = T
    const limiter = limiterOver(new MemoryStore({ clock: () => time, sweepIntervalMs: 0 }))
    time = Number.NaN
    const mistake = new Error('listener bug')
    limiter.on('store-error', () => {
      throw mistake
    })
    let outcome: Promise<unknown> | undefined
    expect(() => {
      outcome = limiter.consume('api', IP)
    }).not.toThrow()
    await expect(outcome).rejects.toBe(mistake)
  })

  // Past backlog.max with whenFull 'wait', decisions queue; once the breaker opened, the first
  // taken from the queue was answered at once and took no room, and the rest waited for ever.
  it("settles every decision queued for room (whenFull 'wait') once the failing store opens the breaker", async () => {
    const failing: Store = {
      evaluate: () => Promise.reject(new Error('connection refused')),
      reset: async () => {},
      close: async () => {},
    }
    const limiter = createLimiter({
      store: failing,
      rules: { api: { windows: [{ limit: 5, period: '1m' }] } },
      backlog: { max: 2, whenFull: 'wait' },
      onStoreError: 'deny',
      onWarning: () => {},
    })
    const made = await Promise.all(Array.from({ length: 20 }, () => limiter.consume('api', IP)))
    expect(made.every((decision) => decision.reason === 'store-error-denied')).toBe(true)
    expect(limiter.breakerState).toBe('open')
    await limiter.close()
  })

  it('decides through a store that answers through a receiver by the deprecated evaluateInto', async () => {
    const answer: StoreResult = { allowed: true, nowMs: T, windows: [{ remaining: 4, resetAtMs: T, fitsAtMs: T }] }
    const delivered: string[] = []
    const store: Store = {
      evaluate: () => Promise.reject(new Error('evaluate is not the path taken')),
      evaluateInto: (request, receiver) => {
        delivered.push(request.operation)
        if (request.operation === 'peek') receiver.fail(new Error('peek refused'))
        else receiver.answer(answer)
      },
      reset: async () => {},
      close: async () => {},
    }
    const limiter = limiterOver(store)
    expect(await limiter.consume('api', IP)).toMatchObject({ allowed: true, reason: 'ok' })
    expect(await limiter.peek('api', IP)).toMatchObject({ reason: 'store-error-allowed' })
    expect(delivered).toEqual(['consume', 'peek'])
  })

  // A store of another copy of core (ESM beside CommonJS) is answered through its receiver too:
  // the key is a registered symbol, not the copy's own.
  it('decides through a store that answers through a receiver under the registered symbol, evaluate left unasked', async () => {
    const answer: StoreResult = { allowed: true, nowMs: T, windows: [{ remaining: 4, resetAtMs: T, fitsAtMs: T }] }
    const delivered: string[] = []
    const store = {
      evaluate: () => Promise.reject(new Error('evaluate is not the path taken')),
      evaluateInto: () => {
        throw new Error('the deprecated evaluateInto is not the path taken')
      },
      [Symbol.for('tollgate.answersInto')]: (request: StoreRequest, receiver: StoreReceiver) => {
        delivered.push(request.operation)
        setImmediate(() => receiver.answer(answer))
      },
      reset: async () => {},
      close: async () => {},
    } satisfies Store
    const limiter = limiterOver(store)
    expect(await limiter.consume('api', IP)).toMatchObject({ allowed: true, reason: 'ok', windows: [{ remaining: 4 }] })
    expect(delivered).toEqual(['consume'])
  })
})

describe('a store that does not answer', () => {
  it.each(['consume', 'peek'] as const)(
    '%s answers after storeTimeoutMs, with the timeout as the error',
    async (op) => {
      vi.useFakeTimers()
      const { store } = silentStore()
      const decision = await settlesWithin(limiterOver(store, { storeTimeoutMs: 20 })[op]('api', IP), 20)
      expect(decision).toMatchObject({
        allowed: true,
        reason: 'store-error-allowed',
        retryAfterMs: 0,
        windows: [],
        error: { code: 'TG_STORE', message: 'the store did not answer within 20 ms' },
      })
    },
  )

  it('takes the bound and the policy per call', async () => {
    vi.useFakeTimers()
    const { store } = silentStore()
    const limiter = limiterOver(store, { storeTimeoutMs: 5_000 })
    const decision = await settlesWithin(limiter.consume('api', IP, { storeTimeoutMs: 20, onStoreError: 'deny' }), 20)
    expect(decision).toMatchObject({
      allowed: false,
      reason: 'store-error-denied',
      retryAfterMs: 1_000,
      error: { code: 'TG_STORE', message: 'the store did not answer within 20 ms' },
    })
  })

  it('waits 100 ms by default', async () => {
    vi.useFakeTimers()
    const { store } = silentStore()
    const decision = await settlesWithin(limiterOver(store).consume('api', IP), 100)
    expect(decision.error?.message).toBe('the store did not answer within 100 ms')
  })

  // Regression: a decision that timed out said only that, though the store's connection had
  // just been refused with NOAUTH.
  it('names what the store last said, as the message and the cause', async () => {
    vi.useFakeTimers()
    const { store } = silentStore()
    const noauth = new Error('NOAUTH Authentication required.')
    let recent: Error | undefined = noauth
    const limiter = limiterOver({ ...store, recentError: () => recent }, { storeTimeoutMs: 20 })
    const decision = await settlesWithin(limiter.consume('api', IP), 20)
    expect(decision.error).toMatchObject({
      code: 'TG_STORE',
      message: 'the store did not answer within 20 ms; the store last said: NOAUTH Authentication required.',
      cause: noauth,
    })
    recent = undefined
    const later = await settlesWithin(limiter.consume('api', IP), 20)
    expect(later.error?.message).toBe('the store did not answer within 20 ms')
    expect(later.error?.cause).toBeUndefined()
  })

  it('adds what the store last said to a failure that does not say it, keeping its cause', async () => {
    const lost = new Error('Connection is closed.')
    const limiter = limiterOver({ ...rejectingStore(lost), recentError: () => new Error('LOADING Redis is loading') })
    expect((await limiter.consume('api', IP)).error).toMatchObject({
      message: 'the store failed: Connection is closed.; the store last said: LOADING Redis is loading',
      cause: lost,
    })
    const loading = new Error('LOADING Redis is loading')
    const same = limiterOver({ ...rejectingStore(loading), recentError: () => new Error(loading.message) })
    expect((await same.consume('api', IP)).error?.message).toBe('the store failed: LOADING Redis is loading')
  })

  it('refund and reset reject with TG_STORE after the bound', async () => {
    vi.useFakeTimers()
    const { store } = silentStore()
    const limiter = limiterOver(store, { storeTimeoutMs: 20 })
    const refund = limiter.refund('api', IP)
    const reset = limiter.reset('api', IP)
    const outcomes = Promise.allSettled([refund, reset])
    await vi.advanceTimersByTimeAsync(20)
    const [refunded, wasReset] = await outcomes
    for (const outcome of [refunded, wasReset]) {
      expect(outcome).toMatchObject({
        status: 'rejected',
        reason: { code: 'TG_STORE', message: 'the store did not answer within 20 ms' },
      })
    }
  })

  it('leaves no unhandled rejection when the store rejects after the bound', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
      const { store, pending } = silentStore()
      const limiter = limiterOver(store, { storeTimeoutMs: 20 })
      const consumed = limiter.consume('api', IP)
      const refunded = limiter.refund('api', IP).catch((error: unknown) => error)
      const reset = limiter.reset('api', IP).catch((error: unknown) => error)
      await vi.advanceTimersByTimeAsync(20)
      expect((await consumed).reason).toBe('store-error-allowed')
      expect(await refunded).toMatchObject({ code: 'TG_STORE' })
      expect(await reset).toMatchObject({ code: 'TG_STORE' })
      expect(pending).toHaveLength(3)
      for (const call of pending) call.reject(new Error('late reply'))
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled).toEqual([])
  })

  it('ignores an answer that arrives after the bound', async () => {
    vi.useFakeTimers()
    const { store, pending } = silentStore()
    const decision = settlesWithin(limiterOver(store, { storeTimeoutMs: 20 }).consume('api', IP), 20)
    const answered = await decision
    pending[0]?.resolve({ allowed: false, nowMs: T, windows: [] } as never)
    await Promise.resolve()
    expect(answered.reason).toBe('store-error-allowed')
  })

  it('clears its timer when the store answers in time', async () => {
    vi.useFakeTimers()
    const store = new MemoryStore({ clock: () => T, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { storeTimeoutMs: 20 })
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    expect(vi.getTimerCount()).toBe(0)
  })

  // Regression: decisions begun in one tick share a timer, which the first answered cohort
  // cleared; a decision begun later in that tick joined it and was never bounded.
  it('bounds a decision begun in the tick another one was answered', async () => {
    vi.useFakeTimers()
    const { store: silent } = silentStore()
    const answer: StoreResult = { allowed: true, nowMs: T, windows: [{ remaining: 4, resetAtMs: T, fitsAtMs: T }] }
    let calls = 0
    const store: Store = {
      ...silent,
      evaluate: (request) => (calls++ === 0 ? Promise.resolve(answer) : silent.evaluate(request)),
    }
    const limiter = limiterOver(store, { storeTimeoutMs: 20 })
    expect((await limiter.consume('api', IP)).reason).toBe('ok')
    const decision = await settlesWithin(limiter.consume('api', IP), 20)
    expect(decision.error?.message).toBe('the store did not answer within 20 ms')
  })

  it('bounds each of many decisions begun in one tick', async () => {
    vi.useFakeTimers()
    const { store, pending } = silentStore()
    const limiter = limiterOver(store, { storeTimeoutMs: 20 })
    const decisions = Array.from({ length: 5 }, () => limiter.consume('api', IP))
    await Promise.resolve()
    pending[2]?.resolve({ allowed: true, nowMs: T, windows: [{ remaining: 4, resetAtMs: T, fitsAtMs: T }] } as never)
    const settled = await settlesWithin(Promise.all(decisions), 20)
    expect(settled.map((decision) => decision.reason)).toEqual([
      'store-error-allowed',
      'store-error-allowed',
      'ok',
      'store-error-allowed',
      'store-error-allowed',
    ])
  })

  it('shares one timer among waits begun within a millisecond, and bounds each by its own start', async () => {
    vi.useFakeTimers()
    const { store } = silentStore()
    const limiter = limiterOver(store, { storeTimeoutMs: 20 })
    const early = [limiter.consume('api', IP), limiter.consume('api', IP)]
    // A later tick of the same millisecond, as the next request on another socket would be.
    await new Promise<void>((resolve) => process.nextTick(resolve))
    early.push(limiter.consume('api', IP))
    expect(vi.getTimerCount()).toBe(1)
    await vi.advanceTimersByTimeAsync(1)
    const late = limiter.consume('api', IP)
    expect(vi.getTimerCount()).toBe(2)
    let lateSettled = false
    late.then(() => {
      lateSettled = true
    })
    // The first three expire at 20 ms, the fourth, begun 1 ms later, at 21 ms.
    await settlesWithin(Promise.all(early), 19)
    expect(lateSettled).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(lateSettled).toBe(true)
    expect((await late).error?.message).toBe('the store did not answer within 20 ms')
  })

  it('lets close wait for a decision bounded by the timeout', async () => {
    vi.useFakeTimers()
    const { store } = silentStore()
    const limiter = createLimiter({ store, rules: RULES, storeTimeoutMs: 20 })
    const decision = limiter.consume('api', IP)
    let closed = false
    const closing = limiter.close().then(() => {
      closed = true
    })
    await vi.advanceTimersByTimeAsync(19)
    expect(closed).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    await closing
    expect((await decision).reason).toBe('store-error-allowed')
  })
})

describe('store failure options', () => {
  const store = () => new MemoryStore({ clock: () => T, sweepIntervalMs: 0 })

  it.each<[string, Partial<LimiterOptions>, string[]]>([
    ['onStoreError maybe', { onStoreError: 'maybe' as 'allow' }, ['onStoreError', '"maybe"']],
    ['storeTimeoutMs 0', { storeTimeoutMs: 0 }, ['storeTimeoutMs', 'got 0']],
    ['storeTimeoutMs -5', { storeTimeoutMs: -5 }, ['storeTimeoutMs', '-5']],
    ['storeTimeoutMs 60001', { storeTimeoutMs: 60_001 }, ['storeTimeoutMs', '60001']],
    ['storeTimeoutMs 1.5', { storeTimeoutMs: 1.5 }, ['storeTimeoutMs', '1.5']],
    ['storeTimeoutMs "100"', { storeTimeoutMs: '100' as unknown as number }, ['storeTimeoutMs', '"100"']],
    ['storeTimeoutMs Infinity', { storeTimeoutMs: Number.POSITIVE_INFINITY }, ['storeTimeoutMs', 'Infinity']],
  ])('createLimiter rejects %s with TollgateConfigError', (_, options, shown) => {
    let thrown: unknown
    try {
      createLimiter({ store: store(), rules: RULES, ...options })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TollgateConfigError)
    for (const text of shown) expect((thrown as Error).message).toContain(text)
  })

  // Regression: null was taken as 'use the default' through `??`.
  it.each<[string, Partial<LimiterOptions>]>([
    ['onStoreError null', { onStoreError: null as unknown as 'allow' }],
    ['storeTimeoutMs null', { storeTimeoutMs: null as unknown as number }],
  ])('createLimiter rejects %s with TollgateConfigError', (_, options) => {
    expect(() => createLimiter({ store: store(), rules: RULES, ...options })).toThrow(TollgateConfigError)
  })

  it('createLimiter accepts the bounds 1 and 60000', () => {
    limiterOver(store(), { storeTimeoutMs: 1, onStoreError: 'deny' })
    limiterOver(store(), { storeTimeoutMs: 60_000, onStoreError: 'allow' })
  })

  it.each<[string, Record<string, unknown>, string]>([
    ['onStoreError maybe', { onStoreError: 'maybe' }, '"maybe"'],
    ['storeTimeoutMs 0', { storeTimeoutMs: 0 }, 'got 0'],
    ['storeTimeoutMs 70000', { storeTimeoutMs: 70_000 }, '70000'],
    ['storeTimeoutMs 2.5', { storeTimeoutMs: 2.5 }, '2.5'],
  ])('consume, peek and refund reject %s with a TypeError', async (_, options, shown) => {
    const limiter = limiterOver(store())
    for (const op of ['consume', 'peek', 'refund'] as const) {
      const outcome = limiter[op]('api', IP, options)
      await expect(outcome).rejects.toBeInstanceOf(TypeError)
      await expect(outcome).rejects.toBeInstanceOf(TollgateArgumentError)
      await expect(outcome).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
      await expect(outcome).rejects.toThrow(shown)
    }
  })

  it('charges nothing when a call is rejected for its options', async () => {
    const memory = store()
    const limiter = limiterOver(memory)
    await expect(limiter.consume('api', IP, { storeTimeoutMs: 0 })).rejects.toThrow(TypeError)
    expect(memory.size).toBe(0)
    // The same store holds the charge once a call's options are good.
    await limiter.consume('api', IP)
    expect(memory.size).toBe(1)
  })
})

describe('the store request on failure', () => {
  it('asks the store once per decision, with the whole plan', async () => {
    const requests: StoreRequest[] = []
    const recording: Store = {
      evaluate: (request) => {
        requests.push(request)
        return Promise.reject(refused)
      },
      reset: async () => {},
      close: async () => {},
    }
    const limiter = limiterOver(recording)
    await limiter.consume('api', [IP, 'user:alice'], { cost: 2 })
    expect(requests).toHaveLength(1)
    // A target names the rule's state: its name and its shape's digest.
    const state = limiter.rules.get('api')?.stateName
    expect(state).toMatch(/^api@[A-Za-z0-9_-]{4}$/)
    expect(requests[0]).toMatchObject({
      operation: 'consume',
      cost: 2,
      targets: [
        { rule: state, identifier: IP },
        { rule: state, identifier: 'user:alice' },
      ],
    })
  })
})
