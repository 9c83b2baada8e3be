import { getEventListeners } from 'node:events'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import type { LimiterOptions } from '../src/limiter/limiter-config.js'
import type { Decision } from '../src/rules/decision.js'
import type { RulesOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store, StoreRequest, StoreResult } from '../src/stores/store.js'
import { TollgateArgumentError, TollgateError } from '../src/support/errors.js'
import { MAX_TIMER_MS } from '../src/support/timer-delay.js'

const T = 1_763_712_000_000
const IP = 'ip:203.0.113.7'
const PER_SECOND: RulesOptions = { api: { windows: [{ limit: 10, period: '1s' }] } }
const ONE_PER_SECOND: RulesOptions = { api: { windows: [{ limit: 1, period: '1s' }] } }

const opened: Limiter[] = []

beforeEach(() => {
  vi.useFakeTimers({ now: T })
})

afterEach(async () => {
  await Promise.all(opened.splice(0).map((limiter) => limiter.close()))
  vi.useRealTimers()
})

/**
 * A MemoryStore on the fake clock, seen through a store that counts what it is asked and what it
 * charged. `inProcess` keeps the MemoryStore's answer in the same turn (`evaluateSync`); without
 * it the limiter waits for a promise, as it does for Redis.
 */
function countingStore(inProcess: boolean) {
  const inner = new MemoryStore({ clock: () => Date.now(), sweepIntervalMs: 0 })
  const requests: StoreRequest[] = []
  let charged = 0
  const answer = (request: StoreRequest): StoreResult => {
    requests.push(request)
    const result = inner.evaluateSync(request) as StoreResult
    if (request.operation === 'consume' && result.allowed) charged += request.cost
    if (request.operation === 'refund') charged -= request.cost
    return result
  }
  const store: Store = {
    evaluate: async (request) => answer(request),
    ...(inProcess ? { evaluateSync: answer } : {}),
    reset: (targets) => inner.reset(targets),
    close: () => inner.close(),
  }
  return {
    store,
    consumes: () => requests.filter((request) => request.operation === 'consume').length,
    refunds: () => requests.filter((request) => request.operation === 'refund'),
    charged: () => charged,
  }
}

/** A store that answers only when the test lets it: the charge is made as it is asked, the answer given on `release()`. */
function gatedStore() {
  const counting = countingStore(false)
  const held: Array<() => void> = []
  const store: Store = {
    ...counting.store,
    evaluate: (request) => {
      const result = counting.store.evaluate(request)
      return new Promise<StoreResult>((resolve) => held.push(() => resolve(result)))
    },
  }
  return {
    ...counting,
    store,
    release: () => {
      for (const answer of held.splice(0)) answer()
    },
  }
}

function limiterOver(store: Store, rules: RulesOptions = PER_SECOND, options: Partial<LimiterOptions> = {}): Limiter {
  const limiter = createLimiter({ store, rules, onWarning: () => {}, ...options })
  opened.push(limiter)
  return limiter
}

/** The order in which waits settled, by label, and how each did. */
function settlements() {
  const order: string[] = []
  const outcomes = new Map<string, { decision?: Decision; error?: unknown }>()
  const follow = (label: string, promise: Promise<Decision>) => {
    promise.then(
      (decision) => {
        order.push(label)
        outcomes.set(label, { decision })
      },
      (error: unknown) => {
        order.push(label)
        outcomes.set(label, { error })
      },
    )
    return promise
  }
  return { order, outcomes, follow }
}

describe.each([
  ['an in-process store', true],
  ['a store answering by promise', false],
])('waits on %s', (_, inProcess) => {
  it('serves waits first come first served: a later, smaller cost never overtakes an earlier one', async () => {
    const { store } = countingStore(inProcess)
    const limiter = limiterOver(store)
    const { order, outcomes, follow } = settlements()
    follow('a', limiter.wait('api', IP, { cost: 6 }))
    follow('b', limiter.wait('api', IP, { cost: 8 }))
    // 4 units are left, enough for c, but b came first.
    follow('c', limiter.wait('api', IP, { cost: 2 }))
    await vi.advanceTimersByTimeAsync(0)
    expect(order).toEqual(['a'])
    await vi.advanceTimersByTimeAsync(999)
    expect(order).toEqual(['a'])
    await vi.advanceTimersByTimeAsync(1)
    expect(order).toEqual(['a', 'b', 'c'])
    expect(outcomes.get('b')?.decision).toMatchObject({ allowed: true, reason: 'ok', cost: 8, nowMs: T + 1000 })
    expect(outcomes.get('c')?.decision).toMatchObject({ allowed: true, reason: 'ok', cost: 2, nowMs: T + 1000 })
  })

  it('asks the store once per firing of the head’s timer, and never between', async () => {
    const { store, consumes } = countingStore(inProcess)
    const limiter = limiterOver(store, ONE_PER_SECOND)
    const { order, follow } = settlements()
    for (const label of ['a', 'b', 'c']) follow(label, limiter.wait('api', IP))
    await vi.advanceTimersByTimeAsync(0)
    // a allowed, b refused for 1000 ms; c waits behind b without asking.
    expect(consumes()).toBe(2)
    await vi.advanceTimersByTimeAsync(999)
    expect(consumes()).toBe(2)
    await vi.advanceTimersByTimeAsync(1)
    // The timer fires once: b allowed, then c, now the head, refused once.
    expect(consumes()).toBe(4)
    expect(order).toEqual(['a', 'b'])
    await vi.advanceTimersByTimeAsync(1000)
    expect(consumes()).toBe(5)
    expect(order).toEqual(['a', 'b', 'c'])
    await vi.advanceTimersByTimeAsync(10_000)
    expect(consumes()).toBe(5)
  })

  it('serves a burst of 1,000 waits on 10 per second in order, ten a second, each charged once', async () => {
    const { store, consumes, charged } = countingStore(inProcess)
    const limiter = limiterOver(store)
    const servedAt: number[] = []
    const admitted: number[] = []
    const waits = Array.from({ length: 1000 }, (_, i) =>
      limiter.wait('api', IP, { maxWaitMs: 120_000 }).then((decision) => {
        servedAt.push(i)
        admitted.push(decision.nowMs)
        expect(decision.allowed).toBe(true)
        expect(Date.now()).toBe(T + Math.floor(i / 10) * 1000)
      }),
    )
    await vi.advanceTimersByTimeAsync(99_000)
    await Promise.all(waits)
    expect(servedAt).toEqual(Array.from({ length: 1000 }, (_, i) => i))
    // Never more than the limit in any second.
    for (let i = 10; i < admitted.length; i++) {
      expect((admitted[i] as number) - (admitted[i - 10] as number)).toBeGreaterThanOrEqual(1000)
    }
    expect(charged()).toBe(1000)
    // Each wait's one allowed consume, and one refusal per second but the last: no polling.
    expect(consumes()).toBe(1000 + 99)
  })

  it('rejects with TG_CLOSED the waits pending on close(), leaving no timer behind', async () => {
    const { store } = countingStore(inProcess)
    const limiter = limiterOver(store, ONE_PER_SECOND)
    await limiter.wait('api', IP)
    const second = limiter.wait('api', IP)
    const third = limiter.wait('api', IP, { signal: new AbortController().signal })
    await vi.advanceTimersByTimeAsync(0)
    await limiter.close()
    await expect(second).rejects.toMatchObject({ code: 'TG_CLOSED' })
    await expect(third).rejects.toMatchObject({ code: 'TG_CLOSED' })
    expect(vi.getTimerCount()).toBe(0)
    await expect(limiter.wait('api', IP)).rejects.toMatchObject({ code: 'TG_CLOSED' })
  })
})

describe('maxWaitMs', () => {
  it('rejects at once with TG_WAIT_TIMEOUT when the store says the units fit after it', async () => {
    const { store, consumes } = countingStore(true)
    const limiter = limiterOver(store, ONE_PER_SECOND)
    await limiter.consume('api', IP)
    const error = await limiter.wait('api', IP, { maxWaitMs: 500 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TollgateError)
    expect(error).toMatchObject({ code: 'TG_WAIT_TIMEOUT' })
    expect((error as Error).message).toBe(
      "rule 'api': 1 unit fit in 1000 ms at the earliest, later than the wait's maxWaitMs (500 ms)",
    )
    expect(Date.now()).toBe(T)
    expect(consumes()).toBe(2)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('rejects a wait still queued behind another when its maxWaitMs passes, without its asking the store', async () => {
    const { store, consumes } = countingStore(true)
    const limiter = limiterOver(store, { api: { windows: [{ limit: 1, period: '10s' }] } })
    await limiter.consume('api', IP)
    const { order, outcomes, follow } = settlements()
    follow('head', limiter.wait('api', IP, { maxWaitMs: 20_000 }))
    follow('behind', limiter.wait('api', IP, { maxWaitMs: 3000 }))
    await vi.advanceTimersByTimeAsync(2999)
    expect(order).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(order).toEqual(['behind'])
    expect(outcomes.get('behind')?.error).toMatchObject({
      code: 'TG_WAIT_TIMEOUT',
      message: "rule 'api': 1 unit did not fit within the wait's maxWaitMs (3000 ms)",
    })
    await vi.advanceTimersByTimeAsync(7000)
    expect(order).toEqual(['behind', 'head'])
    expect(consumes()).toBe(3)
  })

  it('counts the time spent queued: a head with less left than the store asks for ends at once', async () => {
    const limiter = limiterOver(countingStore(true).store, ONE_PER_SECOND)
    const { order, outcomes, follow } = settlements()
    follow('a', limiter.wait('api', IP))
    follow('b', limiter.wait('api', IP))
    follow('c', limiter.wait('api', IP, { maxWaitMs: 1500 }))
    await vi.advanceTimersByTimeAsync(1000)
    // c became the head at 1000 ms with 500 ms left; the next unit is 1000 ms away.
    expect(order).toEqual(['a', 'b', 'c'])
    expect(outcomes.get('c')?.error).toMatchObject({
      code: 'TG_WAIT_TIMEOUT',
      message:
        "rule 'api': 1 unit fit in 1000 ms at the earliest, later than the 500 ms left of the wait's maxWaitMs (1500 ms)",
    })
  })

  it('takes units that fit right at the deadline, though its deadline was set before the try', async () => {
    const limiter = limiterOver(countingStore(true).store, ONE_PER_SECOND)
    await limiter.consume('api', IP)
    const { order, outcomes, follow } = settlements()
    follow('head', limiter.wait('api', IP))
    // Its deadline timer starts now; its try for the unit freed at 2000 ms is set at 1000 ms.
    follow('next', limiter.wait('api', IP, { maxWaitMs: 2000 }))
    await vi.advanceTimersByTimeAsync(2000)
    expect(order).toEqual(['head', 'next'])
    expect(outcomes.get('next')?.decision).toMatchObject({ allowed: true, nowMs: T + 2000 })
  })

  it('0 takes the units only if they fit now', async () => {
    const limiter = limiterOver(countingStore(true).store, ONE_PER_SECOND)
    await expect(limiter.wait('api', IP, { maxWaitMs: 0 })).resolves.toMatchObject({ allowed: true })
    await expect(limiter.wait('api', IP, { maxWaitMs: 0 })).rejects.toMatchObject({ code: 'TG_WAIT_TIMEOUT' })
  })

  it('defaults to 30 s', async () => {
    const limiter = limiterOver(countingStore(true).store, { api: { windows: [{ limit: 1, period: '1m' }] } })
    await limiter.consume('api', IP)
    await expect(limiter.wait('api', IP)).rejects.toMatchObject({
      code: 'TG_WAIT_TIMEOUT',
      message: "rule 'api': 1 unit fit in 60000 ms at the earliest, later than the wait's maxWaitMs (30000 ms)",
    })
  })

  it.each([
    [-1, '-1'],
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    [MAX_TIMER_MS + 1, String(MAX_TIMER_MS + 1)],
    ['5s', '"5s"'],
  ])('refuses %s, naming the option and the value', async (maxWaitMs, shown) => {
    const limiter = limiterOver(countingStore(true).store)
    const error = await limiter.wait('api', IP, { maxWaitMs: maxWaitMs as number }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TollgateArgumentError)
    expect((error as Error).message).toBe(
      `wait option maxWaitMs must be a number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${shown}`,
    )
  })
})

describe('a signal', () => {
  it('already aborted rejects with TG_ABORTED at once, its reason as cause, asking nothing', async () => {
    const { store, consumes } = countingStore(true)
    const limiter = limiterOver(store)
    const reason = new Error('job cancelled')
    const error = await limiter.wait('api', IP, { signal: AbortSignal.abort(reason) }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'TG_ABORTED', cause: reason })
    expect(consumes()).toBe(0)
  })

  it('aborting a queued wait rejects it at once; the waits behind it keep their turn', async () => {
    const limiter = limiterOver(countingStore(true).store, ONE_PER_SECOND)
    await limiter.consume('api', IP)
    const controller = new AbortController()
    const { order, outcomes, follow } = settlements()
    follow('head', limiter.wait('api', IP))
    follow('aborted', limiter.wait('api', IP, { signal: controller.signal }))
    follow('last', limiter.wait('api', IP))
    await vi.advanceTimersByTimeAsync(500)
    controller.abort()
    await vi.advanceTimersByTimeAsync(0)
    expect(order).toEqual(['aborted'])
    expect(outcomes.get('aborted')?.error).toMatchObject({ code: 'TG_ABORTED' })
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0)
    await vi.advanceTimersByTimeAsync(1500)
    expect(order).toEqual(['aborted', 'head', 'last'])
  })

  it('aborting the head stops its timer, and the wait behind it asks at once', async () => {
    const { store, consumes } = countingStore(true)
    const limiter = limiterOver(store)
    await limiter.consume('api', IP, { cost: 5 })
    const controller = new AbortController()
    const big = limiter.wait('api', IP, { cost: 8, signal: controller.signal })
    const small = limiter.wait('api', IP, { cost: 5 })
    await vi.advanceTimersByTimeAsync(100)
    expect(consumes()).toBe(2)
    controller.abort()
    await expect(big).rejects.toMatchObject({ code: 'TG_ABORTED' })
    await expect(small).resolves.toMatchObject({ allowed: true, nowMs: T + 100 })
    expect(consumes()).toBe(3)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('stops being listened to once the wait is served', async () => {
    const limiter = limiterOver(countingStore(true).store, ONE_PER_SECOND)
    await limiter.consume('api', IP)
    const { signal } = new AbortController()
    const wait = limiter.wait('api', IP, { signal })
    expect(getEventListeners(signal, 'abort')).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(1000)
    await expect(wait).resolves.toMatchObject({ allowed: true })
    expect(getEventListeners(signal, 'abort')).toHaveLength(0)
  })

  it('aborting while the store call is under way gives back what that call charged', async () => {
    const gated = gatedStore()
    const limiter = limiterOver(gated.store)
    const controller = new AbortController()
    const wait = limiter.wait('api', IP, { cost: 3, signal: controller.signal })
    const behind = limiter.wait('api', IP, { cost: 10 })
    await vi.advanceTimersByTimeAsync(0)
    controller.abort()
    await expect(wait).rejects.toMatchObject({ code: 'TG_ABORTED' })
    expect(gated.charged()).toBe(3)
    gated.release()
    await vi.advanceTimersByTimeAsync(0)
    expect(gated.refunds()).toMatchObject([{ operation: 'refund', cost: 3 }])
    // The wait behind asked only once the aborted one's call had answered, and found all 10 units.
    gated.release()
    await expect(behind).resolves.toMatchObject({ allowed: true, cost: 10 })
    expect(gated.charged()).toBe(10)
  })
})

describe('a cost above a window’s limit', () => {
  it('rejects at once with TG_INVALID_ARGUMENT naming the window, asking nothing', async () => {
    const { store, consumes } = countingStore(true)
    const limiter = limiterOver(store, {
      org: { windows: [{ limit: 100, period: '1m' }] },
      api: { windows: [{ limit: 10, period: '1s' }], parent: 'org' },
    })
    const error = await limiter.wait('api', IP, { cost: 11 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TollgateArgumentError)
    expect(error).toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
    expect((error as Error).message).toBe(
      `cost 11 can never fit rule 'api': it is more than its window 10 per 1s (rule 'api', "${IP}") can admit in a whole period, so a wait for it would never end`,
    )
    expect((await limiter.wait('api', IP, { cost: 101 }).catch((e: unknown) => e)) as Error).toHaveProperty(
      'message',
      expect.stringContaining(`its windows 10 per 1s (rule 'api', "${IP}"), 100 per 1m (rule 'org', "${IP}")`),
    )
    expect(consumes()).toBe(0)
  })

  it('is let through in dry run, as consume lets it', async () => {
    const limiter = limiterOver(countingStore(true).store)
    await expect(limiter.wait('api', IP, { cost: 11, dryRun: true })).resolves.toMatchObject({
      allowed: true,
      reason: 'dry-run',
    })
  })

  it('found by the store (rules changed meanwhile) rejects as it would have at once', async () => {
    const store: Store = {
      evaluate: async () => ({
        allowed: false,
        nowMs: Date.now(),
        windows: [{ remaining: 5, resetAtMs: Date.now() + 1000, fitsAtMs: Number.POSITIVE_INFINITY }],
      }),
      reset: async () => {},
      close: async () => {},
    }
    const limiter = limiterOver(store)
    await expect(limiter.wait('api', IP, { cost: 10 })).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
  })
})

describe('when the store fails', () => {
  const refused = new Error('connect ECONNREFUSED 127.0.0.1:6379')
  const failing: Store = {
    evaluate: () => Promise.reject(refused),
    reset: () => Promise.reject(refused),
    close: () => Promise.resolve(),
  }

  it("rejects with the store's error under onStoreError 'deny', each wait after one call, none retried", async () => {
    const evaluate = vi.fn(failing.evaluate)
    const limiter = limiterOver({ ...failing, evaluate }, PER_SECOND, { onStoreError: 'deny' })
    const first = limiter.wait('api', IP)
    const second = limiter.wait('api', IP)
    await expect(first).rejects.toMatchObject({ code: 'TG_STORE', cause: refused })
    await expect(second).rejects.toMatchObject({ code: 'TG_STORE', cause: refused })
    expect(evaluate).toHaveBeenCalledTimes(2)
    await vi.advanceTimersByTimeAsync(5000)
    expect(evaluate).toHaveBeenCalledTimes(2)
  })

  it("resolves with the decision that lets it through under 'allow'", async () => {
    const limiter = limiterOver(failing)
    await expect(limiter.wait('api', IP)).resolves.toMatchObject({ allowed: true, reason: 'store-error-allowed' })
  })

  it('retries a refusal that says to retry at once a millisecond later, not in a loop', async () => {
    let allow = false
    const evaluate = vi.fn(
      async (): Promise<StoreResult> => ({
        allowed: allow,
        nowMs: Date.now(),
        windows: [{ remaining: 0, resetAtMs: Date.now(), fitsAtMs: Date.now() }],
      }),
    )
    const limiter = limiterOver({ evaluate, reset: async () => {}, close: async () => {} })
    const wait = limiter.wait('api', IP)
    await vi.advanceTimersByTimeAsync(0)
    expect(evaluate).toHaveBeenCalledTimes(1)
    await vi.advanceTimersByTimeAsync(5)
    expect(evaluate).toHaveBeenCalledTimes(6)
    allow = true
    await vi.advanceTimersByTimeAsync(1)
    await expect(wait).resolves.toMatchObject({ allowed: true })
  })
})

describe('queues', () => {
  it('are apart for other identifiers and rules', async () => {
    const limiter = limiterOver(countingStore(true).store, {
      api: { windows: [{ limit: 1, period: '1s' }] },
      search: { windows: [{ limit: 1, period: '1s' }] },
    })
    await limiter.consume('api', IP)
    const waiting = limiter.wait('api', IP)
    await expect(limiter.wait('api', 'user:42')).resolves.toMatchObject({ allowed: true })
    await expect(limiter.wait('search', IP)).resolves.toMatchObject({ allowed: true })
    await vi.advanceTimersByTimeAsync(1000)
    await expect(waiting).resolves.toMatchObject({ nowMs: T + 1000 })
  })

  it('are one for the same identifiers in another order', async () => {
    const limiter = limiterOver(countingStore(true).store)
    const { order, follow } = settlements()
    follow('a', limiter.wait('api', [IP, 'user:42'], { cost: 6 }))
    follow('b', limiter.wait('api', [IP, 'user:42'], { cost: 8 }))
    follow('c', limiter.wait('api', ['user:42', IP], { cost: 2 }))
    await vi.advanceTimersByTimeAsync(1000)
    expect(order).toEqual(['a', 'b', 'c'])
  })

  it('take what consume takes: a mistaken option or rule rejects before anything is queued', async () => {
    const limiter = limiterOver(countingStore(true).store)
    await expect(limiter.wait('api', IP, { cost: 1.5 })).rejects.toBeInstanceOf(TollgateArgumentError)
    await expect(limiter.wait('api', IP, { timeout: 5 } as never)).rejects.toThrow(
      "wait options: unknown option 'timeout'; known options are 'cost', 'dryRun', 'onStoreError', 'storeTimeoutMs', 'maxWaitMs', 'signal'",
    )
    await expect(limiter.wait('api', IP, { signal: 'stop' as never })).rejects.toThrow(
      'wait option signal must be an AbortSignal, got "stop"',
    )
    await expect(limiter.wait('apii' as never, IP)).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE' })
    await expect(limiter.wait('api', '')).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
  })
})
