import {
  byIpAndUser,
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  type RateLimitOptions,
  type RulesOptions,
  type Store,
} from '@tollgate/core'
import { type BareItem, type Item, parseDictionary, parseList, Token } from 'structured-headers'
import type { Response } from 'supertest'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Harness, HarnessOptions, HarnessRequest, HarnessRoute, MakeHarness } from './adapter-harness.js'
import { ManualClock } from './manual-clock.js'
import { pollUntil } from './poll.js'

/** A time aligned to every period used below, so windows start at the clock's start. */
const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000)

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

/** Every header field a rate limiter may set, lowercased as Node reports them. */
const RATE_LIMIT_FIELD = /^(x-ratelimit-.+|ratelimit(-.+)?|retry-after)$/

interface ListMember {
  name: BareItem
  params: Record<string, BareItem>
}

/** The rate limit fields of a response, sorted, so a test sees every field an adapter sent. */
function rateLimitFields(response: Response): string[] {
  return Object.keys(response.headers)
    .filter((name) => RATE_LIMIT_FIELD.test(name))
    .sort()
}

function field(response: Response, name: string): string {
  const value: unknown = response.headers[name]
  if (typeof value !== 'string') throw new Error(`expected one ${name} field, got ${JSON.stringify(value)}`)
  return value
}

function member([value, params]: Item): ListMember {
  const plain: Record<string, BareItem> = {}
  for (const [key, param] of params) plain[key] = param instanceof Token ? param.toString() : param
  return { name: value instanceof Token ? value.toString() : value, params: plain }
}

/** A Structured Field List (RFC 9651 §3.1) of items, as plain objects. */
function list(response: Response, name: string): ListMember[] {
  return parseList(field(response, name)).map((entry) => {
    if (Array.isArray(entry[0])) throw new Error(`${name} holds an inner list: ${field(response, name)}`)
    return member(entry as Item)
  })
}

/** A Structured Field Dictionary of bare items, such as draft-7's `RateLimit`. */
function dictionary(response: Response, name: string): Record<string, BareItem> {
  const plain: Record<string, BareItem> = {}
  for (const [key, entry] of parseDictionary(field(response, name))) {
    if (Array.isArray(entry[0]) || entry[1].size > 0) throw new Error(`${name} member ${key} is not a bare item`)
    plain[key] = entry[0] as BareItem
  }
  return plain
}

function problemOf(response: Response): Record<string, unknown> {
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json(;|$)/)
  return JSON.parse(response.text) as Record<string, unknown>
}

function header(request: HarnessRequest, name: string): string | undefined {
  const value = request.headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** A store that is down: every decision it is asked for fails. */
function failingStore(): Store {
  return {
    evaluate: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')),
    reset: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')),
    close: async () => {},
  }
}

/** A store that never answers, like a Redis cut off by a network partition. */
function silentStore(): Store {
  return {
    evaluate: () => new Promise(() => {}),
    reset: () => new Promise(() => {}),
    close: async () => {},
  }
}

/**
 * The behaviour every HTTP adapter shares, run unchanged against each framework through its
 * harness: the same options must give the same statuses, header fields and bodies everywhere.
 */
export function runAdapterConformance(name: string, makeHarness: MakeHarness): void {
  describe(`${name} adapter conformance`, () => {
    let clock: ManualClock
    let harness: Harness | undefined

    beforeEach(() => {
      clock = new ManualClock(T0)
    })
    const limiters: Limiter[] = []
    afterEach(async () => {
      await harness?.close()
      harness = undefined
      await Promise.all(limiters.splice(0).map((limiter) => limiter.close()))
    })

    const store = () => new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 })

    /** A limiter of the test's own, passed to a route, so that the test can peek at its counts. */
    function limiterOf(rules: RulesOptions): Limiter {
      const limiter = createLimiter({ store: store(), rules })
      limiters.push(limiter)
      return limiter
    }

    /** What the loopback client has left of `rule`'s first window. */
    async function left(limiter: Limiter, rule: string): Promise<number | undefined> {
      return (await limiter.peek(rule, 'ip:127.0.0.1', { cost: 0 })).windows[0]?.remaining
    }

    /** Waits until the loopback client has `expected` left: a charge given back lands after the response. */
    function untilLeft(limiter: Limiter, rule: string, expected: number): Promise<void> {
      return pollUntil(`${expected} left of ${rule}`, 5_000, async () => {
        const now = await left(limiter, rule)
        return now === expected ? { done: true, value: undefined } : { done: false, state: `${now} left` }
      })
    }

    async function serve(
      routes: HarnessRoute[],
      { trustProxy = false, errorHandler = false }: Partial<Omit<HarnessOptions, 'routes'>> = {},
    ) {
      harness = await makeHarness({ routes, trustProxy, errorHandler })
      return harness.request
    }

    /** One GET route at `/` limited by `options`, on a fresh store. */
    function serveLimited(
      options: Omit<RateLimitOptions<HarnessRequest>, 'store'>,
      trustProxy: HarnessOptions['trustProxy'] = false,
    ) {
      return serve([{ method: 'GET', path: '/', rateLimit: { store: store(), ...options } }], { trustProxy })
    }

    describe('header formats', () => {
      const api = { rule: 'api', windows: [{ limit: 2, period: '10s' }] } satisfies RateLimitOptions<HarnessRequest>

      it('draft-10: allows exactly the limit, then 429 with Retry-After from the refusing window', async () => {
        const http = await serveLimited(api)
        const expectPolicy = (response: Response) =>
          expect(list(response, 'ratelimit-policy')).toEqual([{ name: 'api-10s', params: { q: 2, w: 10 } }])

        const first = await http.get('/')
        expect(first.status).toBe(200)
        expect(first.body).toEqual({ reason: 'ok' })
        expect(rateLimitFields(first)).toEqual(['ratelimit', 'ratelimit-policy'])
        expectPolicy(first)
        expect(list(first, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 1, t: 10 } }])

        const second = await http.get('/')
        expect(second.status).toBe(200)
        expect(list(second, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 0, t: 10 } }])

        // 5.5 s to wait: the fields round up, never telling a client to come back too early.
        clock.advance(4_500)
        const refused = await http.get('/')
        expect(refused.status).toBe(429)
        expect(rateLimitFields(refused)).toEqual(['ratelimit', 'ratelimit-policy', 'retry-after'])
        expect(refused.headers['retry-after']).toBe('6')
        expectPolicy(refused)
        expect(list(refused, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 0, t: 6 } }])
        expect(problemOf(refused)).toMatchObject({
          type: QUOTA_EXCEEDED,
          status: 429,
          'violated-policies': ['api-10s'],
          'retry-after': 6,
        })

        clock.advance(5_500)
        const again = await http.get('/')
        expect(again.status).toBe(200)
        expect(list(again, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 1, t: 10 } }])
      })

      it('draft-7: RateLimit as limit, remaining, reset and RateLimit-Policy as limit;w', async () => {
        const http = await serveLimited({ ...api, headers: 'draft-7' })

        const first = await http.get('/')
        expect(first.status).toBe(200)
        expect(rateLimitFields(first)).toEqual(['ratelimit', 'ratelimit-policy'])
        expect(dictionary(first, 'ratelimit')).toEqual({ limit: 2, remaining: 1, reset: 10 })
        expect(list(first, 'ratelimit-policy')).toEqual([{ name: 2, params: { w: 10 } }])
        expect(first.headers['ratelimit-policy']).toBe('2;w=10')

        expect((await http.get('/')).status).toBe(200)
        clock.advance(4_000)
        const refused = await http.get('/')
        expect(refused.status).toBe(429)
        expect(rateLimitFields(refused)).toEqual(['ratelimit', 'ratelimit-policy', 'retry-after'])
        expect(refused.headers['retry-after']).toBe('6')
        expect(dictionary(refused, 'ratelimit')).toEqual({ limit: 2, remaining: 0, reset: 6 })
      })

      it('draft-6: RateLimit-Limit, -Remaining, -Reset and RateLimit-Policy', async () => {
        const http = await serveLimited({ ...api, headers: 'draft-6' })
        const fields = (response: Response) => ({
          limit: response.headers['ratelimit-limit'],
          remaining: response.headers['ratelimit-remaining'],
          reset: response.headers['ratelimit-reset'],
        })

        const first = await http.get('/')
        expect(first.status).toBe(200)
        expect(rateLimitFields(first)).toEqual([
          'ratelimit-limit',
          'ratelimit-policy',
          'ratelimit-remaining',
          'ratelimit-reset',
        ])
        expect(fields(first)).toEqual({ limit: '2', remaining: '1', reset: '10' })
        expect(list(first, 'ratelimit-policy')).toEqual([{ name: 2, params: { w: 10 } }])

        expect((await http.get('/')).status).toBe(200)
        clock.advance(4_000)
        const refused = await http.get('/')
        expect(refused.status).toBe(429)
        expect(refused.headers['retry-after']).toBe('6')
        expect(fields(refused)).toEqual({ limit: '2', remaining: '0', reset: '6' })
      })

      it('legacy: X-RateLimit-Limit, -Remaining and -Reset in epoch seconds', async () => {
        const http = await serveLimited({ ...api, headers: 'legacy' })
        const resetAt = String((T0 + 10_000) / 1000)
        const fields = (response: Response) => ({
          limit: response.headers['x-ratelimit-limit'],
          remaining: response.headers['x-ratelimit-remaining'],
          reset: response.headers['x-ratelimit-reset'],
        })

        const first = await http.get('/')
        expect(first.status).toBe(200)
        expect(rateLimitFields(first)).toEqual(['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'])
        expect(fields(first)).toEqual({ limit: '2', remaining: '1', reset: resetAt })

        expect((await http.get('/')).status).toBe(200)
        clock.advance(4_000)
        const refused = await http.get('/')
        expect(refused.status).toBe(429)
        expect(refused.headers['retry-after']).toBe('6')
        expect(fields(refused)).toEqual({ limit: '2', remaining: '0', reset: resetAt })
      })

      it('headers false: no rate limit fields, and only Retry-After on a 429', async () => {
        const http = await serveLimited({ ...api, headers: false })

        for (let i = 0; i < 2; i++) {
          const allowed = await http.get('/')
          expect(allowed.status).toBe(200)
          expect(rateLimitFields(allowed)).toEqual([])
        }
        clock.advance(4_000)
        const refused = await http.get('/')
        expect(refused.status).toBe(429)
        expect(rateLimitFields(refused)).toEqual(['retry-after'])
        expect(refused.headers['retry-after']).toBe('6')
        expect(problemOf(refused)).toMatchObject({ status: 429, 'retry-after': 6 })
      })
    })

    describe('shedding', () => {
      // 10 per 10 s shedding from 2, every draw 0: the third request leaves a use of 3 and is shed.
      it('answers a shed request 429 with Retry-After from when its window is back at lowBurst', async () => {
        const limiter = createLimiter({
          store: store(),
          rules: { api: { windows: [{ limit: 10, period: '10s', lowBurst: 2 }] } },
          random: () => 0,
        })
        limiters.push(limiter)
        const http = await serve([{ method: 'GET', path: '/', rateLimit: { limiter, rule: 'api' } }])
        for (let i = 0; i < 2; i++) expect((await http.get('/')).status).toBe(200)
        // One of the two units leaves at 10 s: 5.5 s from here, rounded up.
        clock.advance(4_500)
        const shed = await http.get('/')
        expect(shed.status).toBe(429)
        expect(shed.headers['retry-after']).toBe('6')
        expect(problemOf(shed)).toMatchObject({
          type: QUOTA_EXCEEDED,
          status: 429,
          'violated-policies': ['api-10s'],
          'retry-after': 6,
        })
        // Nothing was charged: 8 of 10 are left.
        expect(await left(limiter, 'api')).toBe(8)
      })
    })

    describe('header formats, continued', () => {
      it("draft-8: express-rate-limit's name for the draft-10 fields, which it sends unchanged", async () => {
        const http = await serveLimited({ rule: 'api', windows: [{ limit: 2, period: '10s' }], headers: 'draft-8' })
        const first = await http.get('/')
        expect(rateLimitFields(first)).toEqual(['ratelimit', 'ratelimit-policy'])
        expect(first.headers['ratelimit-policy']).toBe('"api-10s";q=2;w=10')
        expect(first.headers.ratelimit).toBe('"api-10s";r=1;t=10')
      })

      // w is whole seconds: a 1.5 s window is advertised as w=2, so a client pacing itself by the
      // policy never outruns it, and the policy's name keeps the exact period.
      it('advertises a window of 1.5 s as w=2, never t beyond it', async () => {
        const http = await serveLimited({ rule: 'api', windows: [{ limit: 2, period: '1500ms' }] })
        const first = await http.get('/')
        expect(list(first, 'ratelimit-policy')).toEqual([{ name: 'api-1500ms', params: { q: 2, w: 2 } }])
        expect(list(first, 'ratelimit')).toEqual([{ name: 'api-1500ms', params: { r: 1, t: 2 } }])
      })
    })

    describe('a rule of two windows', () => {
      const createToken = {
        rule: 'auth.createToken',
        windows: [
          { limit: 20, period: '60s' },
          { limit: 5, period: '3s' },
        ],
      } satisfies RateLimitOptions<HarnessRequest>
      const policy = [
        { name: 'auth.createToken-60s', params: { q: 20, w: 60 } },
        { name: 'auth.createToken-3s', params: { q: 5, w: 3 } },
      ]

      it('reports both windows and names the one that refused, first the 3 s burst, then the minute', async () => {
        const http = await serveLimited(createToken)

        const first = await http.get('/')
        expect(first.status).toBe(200)
        expect(list(first, 'ratelimit-policy')).toEqual(policy)
        expect(list(first, 'ratelimit')).toEqual([
          { name: 'auth.createToken-60s', params: { r: 19, t: 60 } },
          { name: 'auth.createToken-3s', params: { r: 4, t: 3 } },
        ])
        for (let i = 0; i < 4; i++) expect((await http.get('/')).status).toBe(200)

        const burst = await http.get('/')
        expect(burst.status).toBe(429)
        expect(burst.headers['retry-after']).toBe('3')
        expect(list(burst, 'ratelimit-policy')).toEqual(policy)
        expect(list(burst, 'ratelimit')).toEqual([
          { name: 'auth.createToken-60s', params: { r: 15, t: 60 } },
          { name: 'auth.createToken-3s', params: { r: 0, t: 3 } },
        ])
        expect(problemOf(burst)).toEqual({
          type: QUOTA_EXCEEDED,
          title: 'Request cannot be satisfied as assigned quota has been exceeded',
          status: 429,
          detail: 'Quota exceeded for auth.createToken-3s; retry in 3 s.',
          'violated-policies': ['auth.createToken-3s'],
          'identifier-kinds': ['ip'],
          'retry-after': 3,
        })

        // Three more bursts of five, 3 s apart, spend the rest of the minute's 20.
        for (let burstIndex = 1; burstIndex <= 3; burstIndex++) {
          clock.advance(3_000)
          for (let i = 0; i < 5; i++) expect((await http.get('/')).status).toBe(200)
        }
        clock.advance(3_000)
        const minute = await http.get('/')
        expect(minute.status).toBe(429)
        expect(minute.headers['retry-after']).toBe('48')
        expect(list(minute, 'ratelimit')).toEqual([
          { name: 'auth.createToken-60s', params: { r: 0, t: 48 } },
          { name: 'auth.createToken-3s', params: { r: 5, t: 0 } },
        ])
        expect(problemOf(minute)).toMatchObject({
          'violated-policies': ['auth.createToken-60s'],
          'retry-after': 48,
        })
      })
    })

    describe('routes', () => {
      it('limits each route by its own options and leaves a route without any alone', async () => {
        const http = await serve([
          {
            method: 'GET',
            path: '/one',
            rateLimit: { store: store(), rule: 'one', windows: [{ limit: 1, period: '10s' }] },
          },
          {
            method: 'GET',
            path: '/three',
            rateLimit: { store: store(), rule: 'three', windows: [{ limit: 3, period: '1m' }] },
          },
          { method: 'GET', path: '/open' },
        ])

        expect((await http.get('/one')).status).toBe(200)
        const one = await http.get('/one')
        expect(one.status).toBe(429)
        expect(one.headers['retry-after']).toBe('10')

        const three = await http.get('/three')
        expect(three.status).toBe(200)
        expect(list(three, 'ratelimit-policy')).toEqual([{ name: 'three-60s', params: { q: 3, w: 60 } }])
        expect(list(three, 'ratelimit')).toEqual([{ name: 'three-60s', params: { r: 2, t: 60 } }])

        for (let i = 0; i < 5; i++) {
          const open = await http.get('/open')
          expect(open.status).toBe(200)
          expect(open.body).toEqual({ reason: null })
          expect(rateLimitFields(open)).toEqual([])
        }
      })

      // Regression: every middleware's inline windows were rule 'default', so on one store five
      // requests to a 100 a minute route made the first to a 2 a minute route a 429.
      it('keeps apart two routes whose inline windows differ, on one store', async () => {
        const shared = store()
        const http = await serve([
          { method: 'GET', path: '/a', rateLimit: { store: shared, windows: [{ limit: 100, period: '1m' }] } },
          { method: 'GET', path: '/b', rateLimit: { store: shared, windows: [{ limit: 2, period: '1m' }] } },
        ])

        for (let i = 0; i < 5; i++) expect((await http.get('/a')).status).toBe(200)
        const a = list(await http.get('/a'), 'ratelimit')
        expect(a).toEqual([{ name: expect.any(String), params: { r: 94, t: 60 } }])
        const b = await http.get('/b')
        expect(b.status).toBe(200)
        const [policy] = list(b, 'ratelimit-policy')
        expect(policy).toEqual({ name: expect.any(String), params: { q: 2, w: 60 } })
        expect(policy?.name).not.toBe(a[0]?.name)
        expect(list(b, 'ratelimit')).toEqual([{ name: policy?.name, params: { r: 1, t: 60 } }])
      })

      it('does not count a request that skip() accepts, nor send it headers', async () => {
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 2, period: '10s' }],
          skip: (request) => header(request, 'x-internal') === 'yes',
        })

        for (let i = 0; i < 5; i++) {
          const skipped = await http.get('/').set('x-internal', 'yes')
          expect(skipped.status).toBe(200)
          expect(skipped.body).toEqual({ reason: null })
          expect(rateLimitFields(skipped)).toEqual([])
        }
        const counted = await http.get('/')
        expect(counted.status).toBe(200)
        expect(list(counted, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 1, t: 10 } }])
      })
    })

    describe('a rule mounted twice', () => {
      // Regression: the same rule on the app and again on the route charged each request twice,
      // silently, so at a limit of 4 only 2 requests passed.
      it('charges each request once, refuses the 5th of 4, and warns once naming the rule and route', async () => {
        const limiter = limiterOf({ api: { windows: [{ limit: 4, period: '10s' }] } })
        const warnings: Array<{ message: string; code: string }> = []
        const http = await serve([
          {
            method: 'GET',
            path: '/twice',
            rateLimit: { limiter, rule: 'api', onWarning: (message, code) => warnings.push({ message, code }) },
            mountedTwice: true,
          },
        ])

        for (let i = 0; i < 4; i++) {
          const passed = await http.get(`/twice?page=${i}`)
          expect(passed.status).toBe(200)
          expect(list(passed, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 3 - i, t: 10 } }])
        }
        expect(await left(limiter, 'api')).toBe(0)
        const refused = await http.get('/twice')
        expect(refused.status).toBe(429)
        expect(problemOf(refused)).toMatchObject({ 'violated-policies': ['api-10s'] })
        expect(warnings).toEqual([{ code: 'TG_RULE_APPLIED_TWICE', message: expect.stringContaining("rule 'api'") }])
        expect(warnings[0]?.message).toContain('GET /twice ')
        expect(warnings[0]?.message).not.toContain('page=')
        expect(warnings[0]?.message).toContain('remove one of the two applications')
      })
    })

    describe('cost', () => {
      // Regression: an upload larger than the window ever admits was a 429 without Retry-After, which
      // clients retry with backoff for nothing; 413 is a status they do not retry.
      it('charges the bytes of an upload and refuses with 413, without Retry-After, one that can never fit', async () => {
        const http = await serve([
          {
            method: 'POST',
            path: '/upload',
            rateLimit: {
              store: store(),
              rule: 'upload',
              windows: [{ limit: 1000, period: '1m' }],
              quotaUnit: 'content-bytes',
              cost: (request) => Number(header(request, 'content-length') ?? 0),
            },
          },
        ])
        const upload = (bytes: number) => http.post('/upload').set('content-type', 'text/plain').send('x'.repeat(bytes))
        const policy = [{ name: 'upload-60s', params: { q: 1000, w: 60, qu: 'content-bytes' } }]

        const first = await upload(600)
        expect(first.status).toBe(200)
        expect(list(first, 'ratelimit-policy')).toEqual(policy)
        expect(first.headers['ratelimit-policy']).toContain(';qu="content-bytes"')
        expect(list(first, 'ratelimit')).toEqual([{ name: 'upload-60s', params: { r: 400, t: 60 } }])

        const second = await upload(600)
        expect(second.status).toBe(429)
        expect(second.headers['retry-after']).toBe('60')
        expect(list(second, 'ratelimit')).toEqual([{ name: 'upload-60s', params: { r: 400, t: 60 } }])

        const tooLarge = await upload(2000)
        expect(tooLarge.status).toBe(413)
        expect(rateLimitFields(tooLarge)).toEqual(['ratelimit', 'ratelimit-policy'])
        expect(problemOf(tooLarge)).toMatchObject({
          type: QUOTA_EXCEEDED,
          status: 413,
          detail:
            'This request costs 2000, more than upload-60s admits (1000); retrying will not help, a smaller request may pass.',
          'violated-policies': ['upload-60s'],
          'retry-after': null,
        })

        const small = await upload(400)
        expect(small.status).toBe(200)
        expect(list(small, 'ratelimit')).toEqual([{ name: 'upload-60s', params: { r: 0, t: 60 } }])
      })
    })

    describe('client identity', () => {
      it('charges the address and the user in one decision, so a user cannot hop addresses', async () => {
        const http = await serveLimited(
          {
            rule: 'login',
            windows: [{ limit: 3, period: '10s' }],
            identify: byIpAndUser((request) => header(request, 'x-user')),
          },
          true,
        )
        const from = (address: string, user?: string) => {
          const request = http.get('/').set('x-forwarded-for', address)
          return user ? request.set('x-user', user) : request
        }

        for (let i = 0; i < 3; i++) expect((await from('203.0.113.1', '42')).status).toBe(200)
        const hopped = await from('203.0.113.2', '42')
        expect(hopped.status).toBe(429)
        expect(problemOf(hopped)).toMatchObject({ 'violated-policies': ['login-10s'] })

        const anonymous = await from('203.0.113.2')
        expect(anonymous.status).toBe(200)
        expect(list(anonymous, 'ratelimit')).toEqual([{ name: 'login-10s', params: { r: 2, t: 10 } }])
        expect((await from('203.0.113.2', '7')).status).toBe(200)
      })

      it('counts IPv6 addresses within one /56 as one client, and another /56 apart', async () => {
        const http = await serveLimited({ rule: 'api', windows: [{ limit: 2, period: '10s' }] }, true)
        const from = (address: string) => http.get('/').set('x-forwarded-for', address)

        expect((await from('2001:db8:1234:5601::1')).status).toBe(200)
        expect((await from('2001:db8:1234:56ff:aaaa:bbbb:cccc:dddd')).status).toBe(200)
        expect((await from('2001:db8:1234:5680::9')).status).toBe(429)

        const neighbour = await from('2001:db8:1234:5700::1')
        expect(neighbour.status).toBe(200)
        expect(list(neighbour, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 1, t: 10 } }])
      })

      it('tells clients apart by X-Forwarded-For when the framework trusts the proxy', async () => {
        const warnings: string[] = []
        const http = await serveLimited(
          { rule: 'api', windows: [{ limit: 1, period: '10s' }], onWarning: (_message, code) => warnings.push(code) },
          true,
        )
        const from = (address: string) => http.get('/').set('x-forwarded-for', address)

        expect((await from('198.51.100.1')).status).toBe(200)
        expect((await from('198.51.100.1')).status).toBe(429)
        expect((await from('198.51.100.2')).status).toBe(200)
        expect((await from('198.51.100.3, 10.0.0.1')).status).toBe(200)
        expect(warnings).toEqual([])
      })

      it('ignores a spoofed X-Forwarded-For when no proxy is trusted, and warns once', async () => {
        const warnings: Array<{ message: string; code: string }> = []
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 2, period: '10s' }],
          onWarning: (message, code) => warnings.push({ message, code }),
        })
        const from = (address: string) => http.get('/').set('x-forwarded-for', address)

        expect((await from('198.51.100.1')).status).toBe(200)
        expect((await from('198.51.100.2')).status).toBe(200)
        expect((await from('198.51.100.3')).status).toBe(429)
        expect((await http.get('/')).status).toBe(429)
        expect(warnings).toEqual([
          { message: expect.stringContaining('X-Forwarded-For'), code: 'TG_UNTRUSTED_FORWARDED_FOR' },
        ])
      })

      it('leaves that warning out when ignoreWarnings names it, and gives the others', async () => {
        const warnings: string[] = []
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 2, period: '10s' }],
          // No identifier at all: counted for the address, with a warning of its own.
          identify: () => [],
          ignoreWarnings: ['TG_UNTRUSTED_FORWARDED_FOR'],
          onWarning: (_message, code) => warnings.push(code),
        })

        expect((await http.get('/').set('x-forwarded-for', '198.51.100.1')).status).toBe(200)
        expect((await http.get('/').set('x-forwarded-for', '198.51.100.2')).status).toBe(200)
        expect((await http.get('/').set('x-forwarded-for', '198.51.100.3')).status).toBe(429)
        expect(warnings).toEqual(['TG_UNUSABLE_IDENTIFIER'])
      })
    })

    describe('client identity that does not parse', () => {
      // Regression: with X-Forwarded-For '203.0.113.7:51234' (as some load balancers append it) or
      // 'unknown', every request was a 500 TG_INVALID_ARGUMENT, and none was counted.
      it('counts an address with a port as the address, and any other text under a digest of it, warning once each', async () => {
        const warnings: string[] = []
        const http = await serveLimited(
          { rule: 'api', windows: [{ limit: 2, period: '10s' }], onWarning: (_message, code) => warnings.push(code) },
          true,
        )
        const from = (address: string) => http.get('/').set('x-forwarded-for', address)
        const remaining = async (address: string) => {
          const response = await from(address)
          return [response.status, response.status === 200 ? list(response, 'ratelimit')[0]?.params.r : null]
        }

        expect(await remaining('203.0.113.7:51234')).toEqual([200, 1])
        expect(await remaining('203.0.113.7')).toEqual([200, 0])
        expect((await from('203.0.113.7:443')).status).toBe(429)
        expect(await remaining('[2001:db8:1234:5601::1]:443')).toEqual([200, 1])
        expect(await remaining('2001:db8:1234:56ff::2')).toEqual([200, 0])
        expect(await remaining('unknown')).toEqual([200, 1])
        expect(await remaining('unknown')).toEqual([200, 0])
        expect((await from('unknown')).status).toBe(429)
        expect(await remaining('not-an-address')).toEqual([200, 1])
        expect(warnings).toEqual(['TG_UNPARSEABLE_CLIENT_ADDRESS', 'TG_UNPARSEABLE_CLIENT_ADDRESS'])
      })

      // Regression: a user id identify could not use (too long, not a string) made the request a
      // 500, and its address was not charged either.
      it('counts a user id too long by a digest of it, and one that is no id for the address alone', async () => {
        const warnings: string[] = []
        const http = await serveLimited(
          {
            rule: 'login',
            windows: [{ limit: 2, period: '10s' }],
            identify: byIpAndUser((request) => {
              const user = header(request, 'x-user')
              // A JSON body's username can be an object; a header can only stand in for it here.
              return user === 'object' ? ({ $ne: null } as unknown as string) : user?.repeat(5_000)
            }),
            onWarning: (_message, code) => warnings.push(code),
          },
          true,
        )
        const from = (address: string, user: string) =>
          http.get('/').set('x-forwarded-for', address).set('x-user', user)

        expect((await from('198.51.100.1', 'alice')).status).toBe(200)
        expect((await from('198.51.100.2', 'alice')).status).toBe(200)
        const third = await from('198.51.100.3', 'alice')
        expect(third.status).toBe(429)
        expect(problemOf(third)).toMatchObject({ 'identifier-kinds': ['user'] })

        expect((await from('198.51.100.1', 'object')).status).toBe(200)
        const charged = await from('198.51.100.1', 'object')
        expect(charged.status).toBe(429)
        expect(problemOf(charged)).toMatchObject({ 'identifier-kinds': ['ip'] })
        expect(warnings).toEqual(['TG_UNUSABLE_IDENTIFIER', 'TG_UNUSABLE_IDENTIFIER'])
      })
    })

    describe('a proxy trusted, but not the peer', () => {
      // Regression: with a proxy setting that trusts no peer (Fastify 5's trustProxy: 1), every
      // client behind the proxy counted as the proxy, and nothing warned because a proxy was trusted.
      it("warns once when X-Forwarded-For arrives but the address decided on is the peer's", async () => {
        const warnings: string[] = []
        const http = await serveLimited(
          { rule: 'api', windows: [{ limit: 1, period: '10s' }], onWarning: (_message, code) => warnings.push(code) },
          'not-the-peer',
        )
        const from = (address: string) => http.get('/').set('x-forwarded-for', address)

        expect((await from('203.0.113.7')).status).toBe(200)
        // Another client, counted as the same peer.
        expect((await from('198.51.100.9')).status).toBe(429)
        expect(warnings).toEqual(['TG_FORWARDED_FOR_UNUSED'])
      })
    })

    describe("the app's own error handling", () => {
      // Regression: on Koa, which threw its refusals, an app with the usual error middleware
      // answered them with its own JSON instead of the problem+json 429.
      it('leaves the refusal as the limiter answers it: problem+json 429 with every field', async () => {
        const http = await serve(
          [
            {
              method: 'GET',
              path: '/',
              rateLimit: { store: store(), rule: 'api', windows: [{ limit: 1, period: '10s' }] },
            },
          ],
          { errorHandler: true },
        )

        expect((await http.get('/')).status).toBe(200)
        const refused = await http.get('/')
        expect(refused.status).toBe(429)
        expect(rateLimitFields(refused)).toEqual(['ratelimit', 'ratelimit-policy', 'retry-after'])
        expect(problemOf(refused)).toMatchObject({
          type: QUOTA_EXCEEDED,
          status: 429,
          'violated-policies': ['api-10s'],
          'retry-after': 10,
        })
      })

      // Regression: on Koa only, a handler's error lost the rate limit fields, which Koa's default
      // error handler clears.
      it.each([
        ["the framework's default", false],
        ["the app's own", true],
      ])("keeps the rate limit fields on a handler's error, through %s error handling", async (_, errorHandler) => {
        const http = await serve(
          [
            {
              method: 'GET',
              path: '/',
              rateLimit: { store: store(), rule: 'api', windows: [{ limit: 2, period: '10s' }] },
              throws: true,
            },
          ],
          { errorHandler },
        )

        const failed = await http.get('/')
        expect(failed.status).toBe(502)
        expect(rateLimitFields(failed)).toEqual(['ratelimit', 'ratelimit-policy'])
        expect(list(failed, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 1, t: 10 } }])
        if (errorHandler) expect(JSON.parse(failed.text)).toEqual({ error: 'upstream down' })
      })
    })

    describe('dry run', () => {
      it('never refuses, still reports the headers and tells onLimited of each would-be refusal', async () => {
        const limited: Decision[] = []
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 1, period: '10s' }],
          dryRun: true,
          onLimited: (_request, decision) => {
            limited.push(decision)
          },
        })

        const first = await http.get('/')
        expect(first.status).toBe(200)
        expect(first.body).toEqual({ reason: 'ok' })
        for (let i = 0; i < 3; i++) {
          const over = await http.get('/')
          expect(over.status).toBe(200)
          expect(over.body).toEqual({ reason: 'dry-run' })
          expect(rateLimitFields(over)).toEqual(['ratelimit', 'ratelimit-policy'])
          expect(list(over, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 0, t: 10 } }])
        }
        expect(limited).toHaveLength(3)
        for (const decision of limited) {
          expect(decision).toMatchObject({ allowed: true, reason: 'dry-run', rule: 'api' })
          expect(decision.windows).toEqual([expect.objectContaining({ failed: true, remaining: 0 })])
        }
      })
    })

    describe('store failure', () => {
      it("fails open with onStoreError 'allow': 200 and no rate limit fields", async () => {
        const http = await serve([
          {
            method: 'GET',
            path: '/',
            rateLimit: { store: failingStore(), windows: [{ limit: 1, period: '10s' }], onStoreError: 'allow' },
          },
        ])
        for (let i = 0; i < 3; i++) {
          const response = await http.get('/')
          expect(response.status).toBe(200)
          expect(response.body).toEqual({ reason: 'store-error-allowed' })
          expect(rateLimitFields(response)).toEqual([])
        }
      })

      it("fails closed with onStoreError 'deny': 503 problem+json with Retry-After", async () => {
        const http = await serve([
          {
            method: 'GET',
            path: '/',
            rateLimit: { store: failingStore(), windows: [{ limit: 1, period: '10s' }], onStoreError: 'deny' },
          },
        ])
        const response = await http.get('/')
        expect(response.status).toBe(503)
        expect(rateLimitFields(response)).toEqual(['retry-after'])
        expect(response.headers['retry-after']).toBe('1')
        expect(problemOf(response)).toMatchObject({ type: 'about:blank', status: 503, 'retry-after': 1 })
      })

      it('answers within storeTimeoutMs when the store never does', async () => {
        const http = await serve([
          {
            method: 'GET',
            path: '/allow',
            rateLimit: { store: silentStore(), windows: [{ limit: 1, period: '10s' }], storeTimeoutMs: 50 },
          },
          {
            method: 'GET',
            path: '/deny',
            rateLimit: {
              store: silentStore(),
              windows: [{ limit: 1, period: '10s' }],
              storeTimeoutMs: 50,
              onStoreError: 'deny',
            },
          },
        ])

        const started = performance.now()
        const allowed = await http.get('/allow')
        expect(performance.now() - started).toBeLessThan(1_000)
        expect(allowed.status).toBe(200)
        expect(allowed.body).toEqual({ reason: 'store-error-allowed' })

        const denied = await http.get('/deny')
        expect(denied.status).toBe(503)
        expect(denied.headers['retry-after']).toBe('1')
      })
    })

    describe('refusal hooks', () => {
      it('calls onLimited once per refusal, with the request and the decision', async () => {
        const calls: Array<{ attempt: string | undefined; decision: Decision }> = []
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 1, period: '10s' }],
          onLimited: (request, decision) => {
            calls.push({ attempt: header(request, 'x-attempt'), decision })
          },
        })

        for (const attempt of ['1', '2', '3']) await http.get('/').set('x-attempt', attempt)
        expect(calls.map((call) => call.attempt)).toEqual(['2', '3'])
        for (const { decision } of calls) {
          expect(decision).toMatchObject({ allowed: false, reason: 'limited', rule: 'api', retryAfterMs: 10_000 })
        }
      })

      it('sends the body problem() returns instead of the default 429 body, keeping the fields', async () => {
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 1, period: '10s' }],
          problem: (decision, request) => ({
            type: 'https://example.com/problems/slow-down',
            title: 'Slow down',
            status: 429,
            rule: decision.rule,
            attempt: header(request, 'x-attempt') ?? null,
          }),
        })

        expect((await http.get('/')).status).toBe(200)
        const refused = await http.get('/').set('x-attempt', '2')
        expect(refused.status).toBe(429)
        expect(refused.headers['retry-after']).toBe('10')
        expect(rateLimitFields(refused)).toEqual(['ratelimit', 'ratelimit-policy', 'retry-after'])
        expect(problemOf(refused)).toEqual({
          type: 'https://example.com/problems/slow-down',
          title: 'Slow down',
          status: 429,
          rule: 'api',
          attempt: '2',
        })
      })

      it("hands a throwing callback's error to the framework's error handling: 500", async () => {
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 1, period: '10s' }],
          identify: (request) => {
            if (header(request, 'x-user') === undefined) throw new Error('no user on this request')
            return `user:${header(request, 'x-user')}`
          },
        })

        expect((await http.get('/')).status).toBe(500)
        const next = await http.get('/').set('x-user', 'alice')
        expect(next.status).toBe(200)
        expect(list(next, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 0, t: 10 } }])
      })
    })

    describe('a rule per request', () => {
      const plans = {
        'api.free': { windows: [{ limit: 1, period: '10s' }] },
        'api.pro': { windows: [{ limit: 3, period: '10s' }] },
      } as const
      const byPlan = (request: HarnessRequest) => {
        const plan = header(request, 'x-plan')
        return plan === undefined ? 'api.free' : `api.${plan}`
      }

      it('limits each request by the rule the function names, and answers with that rule in headers and problem', async () => {
        const http = await serveLimited({ rules: plans, rule: byPlan })

        const pro = await http.get('/').set('x-plan', 'pro')
        expect(pro.status).toBe(200)
        expect(list(pro, 'ratelimit-policy')).toEqual([{ name: 'api.pro-10s', params: { q: 3, w: 10 } }])
        expect(list(pro, 'ratelimit')).toEqual([{ name: 'api.pro-10s', params: { r: 2, t: 10 } }])

        expect((await http.get('/')).status).toBe(200)
        const free = await http.get('/')
        expect(free.status).toBe(429)
        expect(list(free, 'ratelimit-policy')).toEqual([{ name: 'api.free-10s', params: { q: 1, w: 10 } }])
        expect(problemOf(free)).toMatchObject({ 'violated-policies': ['api.free-10s'] })
        expect((await http.get('/').set('x-plan', 'pro')).status).toBe(200)
      })

      it.each([
        ["the framework's default", false],
        ["the app's own", true],
      ])(
        'fails a request it names an unknown rule for through %s error handling, and that one alone',
        async (_, errorHandler) => {
          const http = await serve(
            [{ method: 'GET', path: '/', rateLimit: { store: store(), rules: plans, rule: byPlan } }],
            { errorHandler },
          )
          const gold = await http.get('/').set('x-plan', 'gold')
          expect(gold.status).toBe(500)
          if (errorHandler) {
            expect(JSON.parse(gold.text)).toEqual({
              error: 'option rule chose "api.gold", which is not one of the limiter\'s rules: api.free, api.pro',
            })
          }
          expect((await http.get('/')).status).toBe(200)
        },
      )
    })

    describe('countOnly', () => {
      const login = { login: { windows: [{ limit: 2, period: '10s' }] } } as const

      // What express-rate-limit's skipSuccessfulRequests is for: count only failed logins.
      it("'failures': a response below 400 gives its charge back once sent, so only failures are limited", async () => {
        const limiter = limiterOf(login)
        const http = await serve([
          { method: 'POST', path: '/login', rateLimit: { limiter, rule: 'login', countOnly: 'failures' } },
        ])

        for (let i = 0; i < 3; i++) {
          const welcome = await http.post('/login')
          expect(welcome.status).toBe(200)
          // Charged while it was answered; given back once the answer went out.
          expect(list(welcome, 'ratelimit')).toEqual([{ name: 'login-10s', params: { r: 1, t: 10 } }])
          await untilLeft(limiter, 'login', 2)
        }
        expect((await http.post('/login').set('x-status', '401')).status).toBe(401)
        expect((await http.post('/login').set('x-status', '401')).status).toBe(401)
        expect(await left(limiter, 'login')).toBe(0)
        const refused = await http.post('/login')
        expect(refused.status).toBe(429)
        expect(problemOf(refused)).toMatchObject({ 'violated-policies': ['login-10s'] })
      })

      it.each([
        ["the framework's default", false],
        ["the app's own", true],
      ])(
        "'successes': a handler's error, answered through %s error handling, gives its charge back",
        async (_, errorHandler) => {
          const limiter = limiterOf(login)
          const http = await serve(
            [
              {
                method: 'GET',
                path: '/',
                rateLimit: { limiter, rule: 'login', countOnly: 'successes' },
                throws: true,
              },
            ],
            { errorHandler },
          )
          for (let i = 0; i < 3; i++) {
            expect((await http.get('/')).status).toBe(502)
            await untilLeft(limiter, 'login', 2)
          }
        },
      )

      it('tells a function of the outcome the status sent, or none when the client went away first', async () => {
        const limiter = limiterOf(login)
        const statuses: Array<number | null> = []
        const countOnly = ({ status }: { status: number | undefined }) => {
          statuses.push(status ?? null)
          return status === 403
        }
        const http = await serve([
          { method: 'GET', path: '/', rateLimit: { limiter, rule: 'login', countOnly } },
          { method: 'GET', path: '/slow', rateLimit: { limiter, rule: 'login', countOnly }, hangs: true },
        ])

        expect((await http.get('/').set('x-status', '403')).status).toBe(403)
        expect((await http.get('/').set('x-status', '404')).status).toBe(404)
        await untilLeft(limiter, 'login', 1)

        const slow = http.get('/slow')
        const gone = slow.then(
          () => 'answered',
          () => 'aborted',
        )
        await untilLeft(limiter, 'login', 0)
        slow.abort()
        expect(await gone).toBe('aborted')
        await untilLeft(limiter, 'login', 1)
        expect(statuses).toEqual([403, 404, null])
      })
    })

    describe('settle', () => {
      const tokens = { tokens: { algorithm: 'token-bucket', windows: [{ limit: 100, period: '1h' }] } } as const

      it('charges the cost settle gives once the response is done, in place of the estimate, into debt past the limit', async () => {
        const limiter = limiterOf(tokens)
        const seen: Array<number | null> = []
        const settle = (request: HarnessRequest, response: { statusCode: number }) => {
          seen.push(response.statusCode)
          return Number(header(request, 'x-tokens'))
        }
        const http = await serve([
          { method: 'GET', path: '/', rateLimit: { limiter, rule: 'tokens', cost: 10, settle } },
        ])

        const first = await http.get('/').set('x-tokens', '3')
        expect(first.status).toBe(200)
        // The estimate was charged while the request was answered.
        expect(list(first, 'ratelimit')).toEqual([{ name: 'tokens-3600s', params: { r: 90, t: 36 } }])
        await untilLeft(limiter, 'tokens', 97)
        expect((await http.get('/').set('x-tokens', '150')).status).toBe(200)
        await untilLeft(limiter, 'tokens', 0)
        const refused = await http.get('/').set('x-tokens', '1')
        expect(refused.status).toBe(429)
        // 53 tokens of debt, then 10 for the estimate: 63 at 100 an hour.
        expect(Number(refused.headers['retry-after'])).toBe(2268)
        expect(seen).toEqual([200, 200])
      })

      it('keeps the estimate when settle fails or answers no cost, with one warning', async () => {
        const warnings: string[] = []
        const limiter = limiterOf(tokens)
        const settle = (request: HarnessRequest) => {
          if (header(request, 'x-throw')) throw new Error('no usage reported')
          return -1
        }
        const http = await serve([
          {
            method: 'GET',
            path: '/',
            rateLimit: { limiter, rule: 'tokens', cost: 10, settle, onWarning: (_, code) => warnings.push(code) },
          },
        ])
        expect((await http.get('/')).status).toBe(200)
        expect((await http.get('/').set('x-throw', '1')).status).toBe(200)
        await untilLeft(limiter, 'tokens', 80)
        await pollUntil('both warned', 5_000, async () =>
          warnings.length === 2 ? { done: true, value: undefined } : { done: false, state: warnings.join(', ') },
        )
        expect(warnings).toEqual(['TG_SETTLE_FAILED', 'TG_SETTLE_FAILED'])
      })
    })

    describe('a refusal of its own', () => {
      it.each([
        ["the framework's default", false],
        ["the app's own", true],
      ])(
        'sends the whole response refusal builds, keeping the rate limit fields, whatever %s error handling',
        async (_, errorHandler) => {
          const seen: string[] = []
          const http = await serve(
            [
              {
                method: 'GET',
                path: '/',
                rateLimit: {
                  store: store(),
                  rule: 'api',
                  windows: [{ limit: 1, period: '10s' }],
                  refusal: (decision, request, standard) => {
                    seen.push(`${decision.reason} ${standard.status} ${header(request, 'accept')}`)
                    return {
                      status: 429,
                      headers: { 'Cache-Control': 'no-store' },
                      contentType: 'text/html; charset=utf-8',
                      body: `<p>Too many requests: try again in ${standard.headers['Retry-After']} s.</p>`,
                    }
                  },
                },
              },
            ],
            { errorHandler },
          )

          expect((await http.get('/')).status).toBe(200)
          const refused = await http.get('/').set('accept', 'text/html')
          expect(refused.status).toBe(429)
          expect(refused.headers['content-type']).toBe('text/html; charset=utf-8')
          expect(refused.headers['cache-control']).toBe('no-store')
          expect(refused.text).toBe('<p>Too many requests: try again in 10 s.</p>')
          expect(rateLimitFields(refused)).toEqual(['ratelimit', 'ratelimit-policy', 'retry-after'])
          expect(refused.headers['retry-after']).toBe('10')
          expect(seen).toEqual(['limited 429 text/html'])
        },
      )

      it('may start from the standard refusal and change a part, such as the status or a field', async () => {
        const http = await serveLimited({
          rule: 'api',
          windows: [{ limit: 1, period: '10s' }],
          refusal: (_decision, _request, standard) => ({
            ...standard,
            status: 503,
            headers: { 'retry-after': '30' },
          }),
        })

        await http.get('/')
        const refused = await http.get('/')
        expect(refused.status).toBe(503)
        expect(refused.headers['retry-after']).toBe('30')
        expect(list(refused, 'ratelimit')).toEqual([{ name: 'api-10s', params: { r: 0, t: 10 } }])
        expect(problemOf(refused)).toMatchObject({ type: QUOTA_EXCEEDED, 'violated-policies': ['api-10s'] })
      })
    })
  })
}
