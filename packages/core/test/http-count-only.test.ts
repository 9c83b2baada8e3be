import { describe, expect, it } from 'vitest'
import { byIpAndUser } from '../src/http/by-ip-and-user.js'
import type { ResponseOutcome } from '../src/http/rate-limit-options.js'
import type { Store } from '../src/stores/store.js'
import { engine, FakeResponse, IP, limiterOf, memoryStore, remaining, settled, view } from './http-fixtures.js'

interface Req {
  user?: string
}

const TWO_PER_MINUTE = { api: { windows: [{ limit: 2, period: '1m' }] } } as const

/** An engine on a limiter of its own, and a request through it whose response the test ends. */
function countingOnly(countOnly: 'failures' | 'successes' | ((outcome: ResponseOutcome<Req>) => unknown)) {
  const limiter = limiterOf(TWO_PER_MINUTE)
  const warnings: string[] = []
  const limit = engine<Req>({
    limiter,
    rule: 'api',
    countOnly: countOnly as 'failures',
    onWarning: (message, code) => warnings.push(`${code}: ${message}`),
  })
  async function request(req: Req = {}): Promise<FakeResponse> {
    const response = new FakeResponse()
    expect((await limit.check(req, view({ response }))).action).toBe('continue')
    return response
  }
  return { limiter, limit, warnings, request, left: () => remaining(limiter, 'api') }
}

describe('countOnly', () => {
  it.each([
    ['failures', 200, [2]],
    ['failures', 302, [2]],
    ['failures', 400, [1]],
    ['failures', 503, [1]],
    ['successes', 200, [1]],
    ['successes', 399, [1]],
    ['successes', 401, [2]],
    ['successes', 500, [2]],
  ] as const)('%s: a response with status %i leaves %j', async (mode, status, left) => {
    const { request, left: leftNow } = countingOnly(mode)
    const response = await request()
    // Charged while it is answered, so the limit holds for requests in flight.
    expect(await leftNow()).toEqual([1])
    response.answer(status)
    await settled()
    expect(await leftNow()).toEqual(left)
  })

  // Aborting must not dodge a count of failures: a client that closes every login attempt before
  // the answer is still charged for each.
  it.each([
    ['failures', [1]],
    ['successes', [2]],
  ] as const)('%s: a client gone before the answer counts as a failure, leaving %j', async (mode, left) => {
    const { request, left: leftNow } = countingOnly(mode)
    ;(await request()).abort()
    await settled()
    expect(await leftNow()).toEqual(left)
  })

  it('reads the outcome once, when the response finishes, not again when it closes', async () => {
    const outcomes: Array<number | undefined> = []
    const { request, left } = countingOnly(({ status }) => {
      outcomes.push(status)
      return false
    })
    ;(await request()).answer(204)
    const aborted = await request()
    aborted.abort()
    aborted.emit('close')
    await settled()
    expect(outcomes).toEqual([204, undefined])
    expect(await left()).toEqual([2])
  })

  it('gives the request to a function, awaits it, and keeps the charge only when it returns true', async () => {
    const seen: Array<ResponseOutcome<Req>> = []
    const { request, left } = countingOnly(async (outcome) => {
      seen.push(outcome)
      return outcome.status === 401
    })
    ;(await request({ user: 'ada' })).answer(401)
    ;(await request({ user: 'bob' })).answer(200)
    await settled()
    expect(seen).toEqual([
      { request: { user: 'ada' }, status: 401 },
      { request: { user: 'bob' }, status: 200 },
    ])
    expect(await left()).toEqual([1])
  })

  it('keeps the charge, warning once, when the function returns something other than a boolean or throws', async () => {
    const { request, left, warnings } = countingOnly((outcome) => {
      if (outcome.status === 500) throw new Error('no idea')
      return undefined
    })
    ;(await request()).answer(200)
    ;(await request()).answer(500)
    await settled()
    expect(await left()).toEqual([0])
    expect(warnings).toEqual([
      'TG_REFUND_FAILED: option countOnly returned something other than true or false; the charge is kept, as for true',
      'TG_REFUND_FAILED: a charge countOnly gives back could not be given back, so that request stays counted: no idea',
    ])
  })

  it('gives back the whole cost, for every identifier charged', async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 10, period: '1m' }] } })
    const limit = engine<Req>({
      limiter,
      rule: 'api',
      cost: 4,
      identify: byIpAndUser((req) => req.user),
      countOnly: 'failures',
    })
    const response = new FakeResponse()
    await limit.check({ user: 'ada' }, view({ response }))
    expect(await remaining(limiter, 'api', [IP, 'user:ada'])).toEqual([6, 6])
    response.answer(200)
    await settled()
    expect(await remaining(limiter, 'api', [IP, 'user:ada'])).toEqual([10, 10])
  })

  // A dry run's would-be refusal charged nothing: giving it back would free another request's unit.
  it('gives back nothing for a request a dry run would have refused', async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 1, period: '1m' }] } })
    const limit = engine<Req>({ limiter, rule: 'api', dryRun: true, countOnly: 'failures' })
    const first = new FakeResponse()
    await limit.check({}, view({ response: first }))
    const second = new FakeResponse()
    expect((await limit.check({}, view({ response: second }))).decision?.reason).toBe('dry-run')
    second.answer(200)
    await settled()
    expect(await remaining(limiter, 'api')).toEqual([0])
    first.answer(200)
    await settled()
    expect(await remaining(limiter, 'api')).toEqual([1])
  })

  it('never rejects when the refund fails: the request stays counted, with one warning', async () => {
    const store = memoryStore()
    const failingRefunds: Store = {
      evaluate: (request) =>
        request.operation === 'refund' ? Promise.reject(new Error('connect ECONNREFUSED')) : store.evaluate(request),
      reset: (targets) => store.reset(targets),
      close: () => store.close(),
    }
    const warnings: string[] = []
    const limit = engine<Req>({
      store: failingRefunds,
      rules: TWO_PER_MINUTE,
      rule: 'api',
      countOnly: 'failures',
      onWarning: (_message, code) => warnings.push(code),
    })
    for (let i = 0; i < 2; i++) {
      const response = new FakeResponse()
      await limit.check({}, view({ response }))
      response.answer(200)
    }
    await settled()
    expect(warnings).toEqual(['TG_REFUND_FAILED'])
    expect((await limit.check({}, view())).action).toBe('respond')
  })

  it('warns once and keeps every charge when the adapter gives no response to watch', async () => {
    const { limit, warnings, left } = countingOnly('failures')
    await limit.check({}, view())
    await limit.check({}, view())
    expect(await left()).toEqual([0])
    expect(warnings).toEqual([expect.stringMatching(/^TG_REFUND_FAILED: option countOnly is set but the adapter/)])
  })
})
