import { describe, expect, it } from 'vitest'
import type { RateLimitVerdict, RequestView } from '../src/http/rate-limit.js'
import type { RateLimitOptions, ResponseOutcome } from '../src/http/rate-limit-options.js'
import type { Limiter } from '../src/limiter/limiter.js'
import type { Store } from '../src/stores/store.js'
import { engine, FakeResponse, IP, limiterOf, memoryStore, remaining, settled, view } from './http-fixtures.js'

interface Req {
  user?: string
}

const FOUR_PER_MINUTE = { api: { windows: [{ limit: 4, period: '1m' }] } } as const

interface Warning {
  message: string
  code: string
}

/**
 * Two engines on one limiter and rule, as an app-wide middleware and a route's own would be, with
 * their warnings; `options` go to both, `second` to the second alone.
 */
function mountedTwice(
  limiter: Limiter,
  options: Partial<RateLimitOptions<Req>> = {},
  second: Partial<RateLimitOptions<Req>> = {},
) {
  const warnings: Warning[] = []
  const onWarning = (message: string, code: string) => warnings.push({ message, code })
  const first = engine<Req>({ limiter, rule: 'api', onWarning, ...options })
  const again = engine<Req>({ limiter, rule: 'api', onWarning, ...options, ...second })
  return { first, again, warnings }
}

/** A request's view, as an adapter gives it: its own response, its method and URL. */
function requestView(url = '/x'): RequestView {
  return view({ response: new FakeResponse(), method: 'GET', url })
}

/** A MemoryStore answering only through a promise, as a shared store does, counting what it is asked. */
function countedStore(): Store & { evaluated: number } {
  const inner = memoryStore()
  const counted = {
    evaluated: 0,
    evaluate: (request: Parameters<Store['evaluate']>[0]) => {
      counted.evaluated++
      return inner.evaluate(request)
    },
    reset: (targets: Parameters<Store['reset']>[0]) => inner.reset(targets),
    close: () => inner.close(),
  }
  return counted
}

function statusOf(verdict: RateLimitVerdict): number | 'continue' {
  return verdict.action === 'respond' ? verdict.status : 'continue'
}

describe('a rule applied twice to one request', () => {
  // Regression: the same rule on the app and on the route charged each request twice, silently,
  // so at a limit of 4 only 2 requests passed.
  it('is charged once, so 4 of 4 requests pass and the 5th is refused', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const { first, again } = mountedTwice(limiter)
    const statuses: Array<Array<number | 'continue'>> = []
    for (let i = 0; i < 5; i++) {
      const request = requestView()
      const verdict = await first.check({}, request)
      statuses.push([statusOf(verdict), statusOf(await again.check({}, request))])
      expect(await remaining(limiter, 'api')).toEqual([Math.max(0, 3 - i)])
    }
    expect(statuses).toEqual([
      ['continue', 'continue'],
      ['continue', 'continue'],
      ['continue', 'continue'],
      ['continue', 'continue'],
      [429, 429],
    ])
  })

  it('answers the second application with the verdict of the first, headers and refusal included', async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 1, period: '1m' }] } })
    const { first, again } = mountedTwice(limiter, {}, { headers: 'legacy', cost: 3 })
    for (let i = 0; i < 2; i++) {
      const request = requestView()
      const verdict = await first.check({}, request)
      expect(await again.check({}, request)).toBe(verdict)
    }
  })

  it('warns once, naming the rule and the route without its query, and what to do', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const { first, again, warnings } = mountedTwice(limiter)
    for (const url of ['/orders?token=secret', '/orders/7']) {
      const request = requestView(url)
      await first.check({}, request)
      await again.check({}, request)
    }
    expect(warnings).toEqual([{ code: 'TG_RULE_APPLIED_TWICE', message: expect.stringContaining("rule 'api'") }])
    const [{ message }] = warnings as [Warning]
    expect(message).toContain('GET /orders ')
    expect(message).not.toContain('secret')
    expect(message).toContain('remove one of the two applications')
  })

  // Regression: two applications in flight at once on one request each asked the store.
  it('charges once when the second starts before the first has its answer', async () => {
    const store = countedStore()
    const limiter = limiterOf(FOUR_PER_MINUTE, store)
    const { first, again } = mountedTwice(limiter, { identify: async (_request, client) => client.ipIdentifier })
    const request = requestView()
    const [one, two] = await Promise.all([first.check({}, request), again.check({}, request)])
    expect(two).toBe(one)
    expect(store.evaluated).toBe(1)
    expect(await remaining(limiter, 'api')).toEqual([3])
  })

  it("tells onLimited of a refusal once, a dry run's would-be refusal too", async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 1, period: '1m' }] } })
    const told: string[] = []
    const onLimited = (_request: Req, decision: { reason: string }) => {
      told.push(decision.reason)
    }
    const enforced = mountedTwice(limiter, { onLimited })
    const dryRun = mountedTwice(limiter, { onLimited, dryRun: true })
    for (const { first, again } of [enforced, enforced, dryRun]) {
      const request = requestView()
      await first.check({}, request)
      await again.check({}, request)
    }
    expect(told).toEqual(['limited', 'dry-run'])
  })

  it('settles a countOnly charge once', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const outcomes: Array<number | undefined> = []
    const countOnly = ({ status }: ResponseOutcome<Req>) => {
      outcomes.push(status)
      return false
    }
    const { first, again } = mountedTwice(limiter, { countOnly })
    const response = new FakeResponse()
    const request = view({ response, method: 'GET', url: '/x' })
    await first.check({}, request)
    await again.check({}, request)
    response.answer(200)
    await settled()
    expect(outcomes).toEqual([200])
    expect(await remaining(limiter, 'api')).toEqual([4])
  })

  it('charges each request of its own: the verdict belongs to one response', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const { first, warnings } = mountedTwice(limiter)
    for (let i = 0; i < 3; i++) await first.check({}, requestView())
    expect(await remaining(limiter, 'api')).toEqual([1])
    expect(warnings).toEqual([])
  })

  it('charges a second application that counts other identifiers, such as the user besides the address', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const { first, again, warnings } = mountedTwice(limiter, {}, { identify: (request) => `user:${request.user}` })
    const request = requestView()
    await first.check({ user: 'alice' }, request)
    await again.check({ user: 'alice' }, request)
    expect(await remaining(limiter, 'api', IP)).toEqual([3])
    expect(await remaining(limiter, 'api', 'user:alice')).toEqual([3])
    expect(warnings).toEqual([])
  })

  it('charges the same identifiers once whatever their order', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const { first, again } = mountedTwice(
      limiter,
      { identify: (request, client) => [client.ipIdentifier, `user:${request.user}`] },
      { identify: (request, client) => [`user:${request.user}`, client.ipIdentifier] },
    )
    const request = requestView()
    await first.check({ user: 'alice' }, request)
    await again.check({ user: 'alice' }, request)
    expect(await remaining(limiter, 'api', [IP, 'user:alice'])).toEqual([3, 3])
  })

  it('charges a rule of another limiter on the same request', async () => {
    const shared = memoryStore()
    const one = mountedTwice(limiterOf(FOUR_PER_MINUTE, shared))
    const other = limiterOf({ other: { windows: [{ limit: 4, period: '1m' }] } }, shared)
    const otherLimit = engine<Req>({ limiter: other, rule: 'other' })
    const request = requestView()
    await one.first.check({}, request)
    await otherLimit.check({}, request)
    expect(await remaining(other, 'other')).toEqual([3])
    expect(one.warnings).toEqual([])
  })

  it('remembers nothing for a check given no response: each application charges', async () => {
    const limiter = limiterOf(FOUR_PER_MINUTE)
    const { first, again, warnings } = mountedTwice(limiter)
    const request = view()
    await first.check({}, request)
    await again.check({}, request)
    expect(await remaining(limiter, 'api')).toEqual([2])
    expect(warnings).toEqual([])
  })
})
