import { describe, expect, it } from 'vitest'
import { createRouteRateLimit } from '../src/http/route-rate-limit.js'
import { TollgateError } from '../src/support/errors.js'
import { engine, IP, limiterOf, memoryStore, remaining, view } from './http-fixtures.js'

interface Req {
  plan?: string
}

const plans = {
  'api.free': { windows: [{ limit: 1, period: '1m' }] },
  'api.pro': { windows: [{ limit: 3, period: '1m' }] },
} as const

const byPlan = (req: Req) => (req.plan === 'pro' ? 'api.pro' : 'api.free')

describe('rule as a function of the request', () => {
  it("charges the rule it names, and the headers and the problem speak of that rule's windows", async () => {
    const limit = engine<Req>({ store: memoryStore(), rules: plans, rule: byPlan })

    const pro = await limit.check({ plan: 'pro' }, view())
    expect(pro).toMatchObject({ action: 'continue', decision: { rule: 'api.pro' } })
    expect(pro.headers).toEqual({ 'RateLimit-Policy': '"api.pro-60s";q=3;w=60', RateLimit: '"api.pro-60s";r=2;t=60' })

    expect((await limit.check({ plan: 'free' }, view())).headers.RateLimit).toBe('"api.free-60s";r=0;t=60')
    const refused = await limit.check({ plan: 'free' }, view())
    expect(refused).toMatchObject({
      action: 'respond',
      status: 429,
      headers: { 'RateLimit-Policy': '"api.free-60s";q=1;w=60' },
      problem: { 'violated-policies': ['api.free-60s'] },
      decision: { rule: 'api.free' },
    })
    // The plans count apart: the free refusal took nothing from pro.
    expect((await limit.check({ plan: 'pro' }, view())).headers.RateLimit).toBe('"api.pro-60s";r=1;t=60')
    expect(limit.rule).toBe(byPlan)
  })

  it('awaits an async function, and decides with a limiter passed in', async () => {
    const limiter = limiterOf(plans)
    const limit = engine<Req>({ limiter, rule: async (req) => byPlan(req) })
    expect((await limit.check({ plan: 'pro' }, view())).decision?.rule).toBe('api.pro')
    expect(await remaining(limiter, 'api.pro')).toEqual([2])
  })

  // A name the function returns is known only per request: that request fails, no other does.
  it.each([
    ['a rule the limiter does not hold', 'api.gold', '"api.gold"'],
    ['something other than a name', 42, '42'],
  ])('fails only the request for which it returns %s, naming the rules it holds', async (_, returned, shown) => {
    const limiter = limiterOf(plans)
    const limit = engine<Req>({ limiter, rule: (req) => (req.plan === 'gold' ? (returned as string) : byPlan(req)) })

    const failure = await limit.check({ plan: 'gold' }, view()).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(TollgateError)
    expect(failure).toMatchObject({ code: 'TG_UNKNOWN_RULE' })
    expect((failure as Error).message).toBe(
      `option rule chose ${shown}, which is not one of the limiter's rules: api.free, api.pro`,
    )
    expect(await remaining(limiter, 'api.free')).toEqual([1])
    expect((await limit.check({ plan: 'free' }, view())).action).toBe('continue')
  })

  it('passes to a route that only overrides other options, and a route may bring its own', async () => {
    const base = engine<Req>({ store: memoryStore(), rules: plans, rule: byPlan })
    const legacy = createRouteRateLimit(base, { headers: 'legacy' })
    expect(legacy.limiter).toBe(base.limiter)
    expect((await legacy.check({ plan: 'pro' }, view())).headers['X-RateLimit-Limit']).toBe('3')

    const alwaysFree = createRouteRateLimit(base, { rule: () => 'api.free' })
    expect((await alwaysFree.check({ plan: 'pro' }, view())).decision?.rule).toBe('api.free')
    expect(await remaining(base.limiter, 'api.pro', IP)).toEqual([2])
  })

  it('is refused beside windows of their own, for a route too', () => {
    const base = engine<Req>({ store: memoryStore(), rules: plans, rule: byPlan })
    expect(() => createRouteRateLimit(base, { windows: [{ limit: 1, period: '1s' }], rule: byPlan })).toThrow(
      'option rule as a function chooses among rules: give it rules or a limiter holding them, not inline windows',
    )
  })
})
