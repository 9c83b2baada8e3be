import { describe, expect, it } from 'vitest'
import type { RateLimitVerdict } from '../src/http/rate-limit.js'
import type { RateLimitOptions } from '../src/http/rate-limit-options.js'
import type { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store } from '../src/stores/store.js'
import { TollgateArgumentError, TollgateError } from '../src/support/errors.js'
import { engine, limiterOf, memoryStore, view } from './http-fixtures.js'

interface Req {
  user?: string
  bytes?: number
}

/** Each option that is a function of the request, in a form that returns its value as it is. */
const SYNC_OPTIONS: Record<string, Partial<RateLimitOptions<Req>>> = {
  skip: { skip: (request) => request.user === 'skipped' },
  identify: { identify: (request, client) => [client.ipIdentifier, `user:${request.user}`] },
  cost: { cost: (request) => request.bytes ?? 1 },
  onLimited: { onLimited: () => {} },
  problem: { problem: (decision) => ({ type: 'about:blank', title: `refused by ${decision.rule}`, status: 429 }) },
  refusal: { refusal: (_decision, _request, standard) => ({ ...standard, status: 418 }) },
}

/** The same option, its value in a promise. */
function promising(options: Partial<RateLimitOptions<Req>>): Partial<RateLimitOptions<Req>> {
  const [[name, fn]] = Object.entries(options) as [[string, (...args: unknown[]) => unknown]]
  return { [name]: async (...args: unknown[]) => fn(...args) }
}

function isThenable(value: unknown): boolean {
  return typeof (value as { then?: unknown } | null)?.then === 'function'
}

/** Four requests, the last two refused: every step a check can take, answered as it came. */
async function verdictsOf(options: Partial<RateLimitOptions<Req>>, store: Store = memoryStore()) {
  const limit = engine<Req>({ store, windows: [{ limit: 3, period: '1m' }], ...options })
  const answers: Array<{ atOnce: boolean; verdict: RateLimitVerdict }> = []
  for (const request of [{ user: 'a', bytes: 1 }, { user: 'skipped' }, { user: 'a', bytes: 2 }, { user: 'a' }]) {
    const returned = limit.checkNow(request, view())
    answers.push({ atOnce: !isThenable(returned), verdict: await returned })
  }
  return answers
}

/** A store that decides as a MemoryStore does, but only through a promise, as a shared store does. */
function promisingStore(): Store {
  const inner: MemoryStore = memoryStore()
  return {
    evaluate: (request) => inner.evaluate(request),
    reset: (targets) => inner.reset(targets),
    close: () => inner.close(),
  }
}

describe('createRateLimit: checkNow', () => {
  it('answers at once on an in-process store when no option returns a promise', async () => {
    const answers = await verdictsOf({})
    expect(answers.map((answer) => answer.atOnce)).toEqual([true, true, true, true])
    expect(answers.map(({ verdict }) => (verdict.action === 'respond' ? verdict.status : 'continue'))).toEqual([
      'continue',
      'continue',
      'continue',
      429,
    ])
  })

  it.each(Object.keys(SYNC_OPTIONS))(
    'answers at once when option %s returns its value, in a promise when it returns a promise: the same verdicts',
    async (name) => {
      const options = SYNC_OPTIONS[name] as Partial<RateLimitOptions<Req>>
      const atOnce = await verdictsOf(options)
      const later = await verdictsOf(promising(options))
      expect(atOnce.map((answer) => answer.atOnce)).toEqual([true, true, true, true])
      // Those three are asked only of a refusal: a request let through never waits for them.
      const refusalOnly = name === 'onLimited' || name === 'problem' || name === 'refusal'
      expect(later.map((answer) => answer.atOnce)).toEqual(
        later.map(({ verdict }) => refusalOnly && verdict.action === 'continue'),
      )
      expect(later.some((answer) => !answer.atOnce)).toBe(true)
      expect(later.map((answer) => answer.verdict)).toEqual(atOnce.map((answer) => answer.verdict))
    },
  )

  it('answers in a promise when the store answers through one, the same verdicts', async () => {
    const inProcess = await verdictsOf({})
    const shared = await verdictsOf({}, promisingStore())
    expect(shared.map((answer) => answer.atOnce)).toEqual([false, false, false, false])
    expect(shared.map((answer) => answer.verdict)).toEqual(inProcess.map((answer) => answer.verdict))
  })

  it('never throws: what an option throws comes as a rejected promise', async () => {
    const failure = new Error('rule lookup failed')
    const cases: Array<[Partial<RateLimitOptions<Req>>, unknown]> = [
      [
        {
          rule: () => {
            throw failure
          },
          limiter: limiterOf({ api: { windows: [{ limit: 3, period: '1m' }] } }),
        },
        failure,
      ],
      [{ rule: () => 'nope', limiter: limiterOf({ api: { windows: [{ limit: 3, period: '1m' }] } }) }, TollgateError],
      [
        {
          windows: [{ limit: 3, period: '1m' }],
          identify: () => {
            throw failure
          },
        },
        failure,
      ],
      [
        {
          windows: [{ limit: 3, period: '1m' }],
          cost: () => {
            throw failure
          },
        },
        failure,
      ],
      [
        {
          windows: [{ limit: 1, period: '1m' }],
          cost: 2,
          refusal: () => {
            throw failure
          },
        },
        failure,
      ],
      [{ windows: [{ limit: 3, period: '1m' }], cost: () => -1 }, TollgateArgumentError],
    ]
    for (const [options, expected] of cases) {
      const limit = engine<Req>({ ...(options.limiter ? {} : { store: memoryStore() }), ...options })
      let returned: unknown
      expect(() => {
        returned = limit.checkNow({}, view())
      }).not.toThrow()
      expect(isThenable(returned)).toBe(true)
      if (expected instanceof Error) await expect(returned).rejects.toBe(expected)
      else await expect(returned).rejects.toBeInstanceOf(expected)
    }
  })

  it('counts the address at once when identify throws a TollgateArgumentError', async () => {
    const limit = engine<Req>({
      store: memoryStore(),
      windows: [{ limit: 3, period: '1m' }],
      identify: () => {
        throw new TollgateArgumentError('no user')
      },
    })
    const returned = limit.checkNow({}, view())
    expect(isThenable(returned)).toBe(false)
    expect((returned as RateLimitVerdict).decision?.windows.map((window) => window.identifier)).toEqual([
      'ip:203.0.113.7',
    ])
  })

  it('check resolves to what checkNow answers, always in a promise', async () => {
    const limit = engine<Req>({ store: memoryStore(), windows: [{ limit: 3, period: '1m' }] })
    const promised = limit.check({}, view())
    expect(promised).toBeInstanceOf(Promise)
    const now = limit.checkNow({}, view()) as RateLimitVerdict
    expect((await promised).headers.RateLimit).toBe('"3-in-1m";r=2;t=60')
    expect(now.headers.RateLimit).toBe('"3-in-1m";r=1;t=60')
  })
})
