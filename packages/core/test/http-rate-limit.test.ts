import { afterEach, describe, expect, it, vi } from 'vitest'
import { byIpAndUser } from '../src/http/by-ip-and-user.js'
import { HEADERS_FORMATS } from '../src/http/headers.js'
import { createRateLimit, type RateLimit, type RequestView } from '../src/http/rate-limit.js'
import type { ClientView, RateLimitOptions } from '../src/http/rate-limit-options.js'
import { createRouteRateLimit } from '../src/http/route-rate-limit.js'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import type { Decision } from '../src/rules/decision.js'
import type { RulesOptions, WindowOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store, StoreReceiver, StoreRequest, StoreResult } from '../src/stores/store.js'
import type { Duration } from '../src/support/duration.js'
import { TollgateConfigError, TollgateError } from '../src/support/errors.js'

const T = 1_763_712_000_000
const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

interface Req {
  path?: string
  user?: string | number | null
  bytes?: number
}

const opened: Array<RateLimit<Req> | Limiter> = []

afterEach(async () => {
  vi.useRealTimers()
  await Promise.all(opened.splice(0).map((closable) => closable.close()))
})

function memoryStore(): MemoryStore {
  return new MemoryStore({ clock: () => T, sweepIntervalMs: 0 })
}

function rateLimit(options: RateLimitOptions<Req>): RateLimit<Req> {
  const engine = createRateLimit<Req>({ onWarning: () => {}, ...options })
  opened.push(engine)
  return engine
}

function limiterOf(rules: RulesOptions, store: Store = memoryStore()): Limiter {
  const limiter = createLimiter({ store, rules, onWarning: () => {} })
  opened.push(limiter)
  return limiter
}

function view(ip = '203.0.113.7', overrides: Partial<RequestView> = {}): RequestView {
  return { ip, forwardedFor: undefined, proxyTrusted: false, ...overrides }
}

const NO_ADDRESS: RequestView = { ip: undefined, forwardedFor: undefined, proxyTrusted: false }

function expectConfigError(build: () => unknown, ...shown: string[]): void {
  let thrown: unknown
  try {
    build()
  } catch (error) {
    thrown = error
  }
  expect(thrown).toBeInstanceOf(TollgateConfigError)
  expect(thrown).toHaveProperty('code', 'TG_CONFIG')
  for (const text of shown) expect((thrown as Error).message).toContain(text)
}

const ONE_PER_MINUTE = [{ limit: 1, period: '1m' }] as const

describe('createRateLimit: options are checked at construction', () => {
  const windows: WindowOptions[] = [{ limit: 10, period: '1m' }]

  it.each<[string, Record<string, unknown>, string[]]>([
    ['an unknown key', { windows, limt: 5 }, ["unknown option 'limt'"]],
    ['headers draft-9', { windows, headers: 'draft-9' }, ['option headers', '"draft-9"', "'draft-8'"]],
    ['headers true', { windows, headers: true }, ['option headers', 'true']],
    ['quotaUnit bytes', { windows, quotaUnit: 'bytes' }, ['option quotaUnit', '"bytes"']],
    ['partitionKey y', { windows, partitionKey: 'y' }, ['option partitionKey', '"y"']],
    ['cost -1', { windows, cost: -1 }, ['option cost', '-1']],
    ['cost 1.5', { windows, cost: 1.5 }, ['option cost', '1.5']],
    ['cost x', { windows, cost: 'x' }, ['option cost', '"x"']],
    ['dryRun no', { windows, dryRun: 'no' }, ['option dryRun', '"no"']],
    ['onStoreError maybe', { windows, onStoreError: 'maybe' }, ['option onStoreError', '"maybe"']],
    ['storeTimeoutMs 0', { windows, storeTimeoutMs: 0 }, ['option storeTimeoutMs', 'got 0']],
    ['storeTimeoutMs 70000', { windows, storeTimeoutMs: 70_000 }, ['option storeTimeoutMs', '70000']],
    ['storeTimeoutMs 1.5', { windows, storeTimeoutMs: 1.5 }, ['option storeTimeoutMs', '1.5']],
    ['ipv6Subnet 0', { windows, ipv6Subnet: 0 }, ['ipv6Subnet', 'got 0']],
    ['ipv6Subnet 129', { windows, ipv6Subnet: 129 }, ['ipv6Subnet', '129']],
    ['identify x', { windows, identify: 'x' }, ['option identify', '"x"']],
    ['skip true', { windows, skip: true }, ['option skip', 'true']],
    ['onLimited {}', { windows, onLimited: {} }, ['option onLimited', '{}']],
    ['problem 429', { windows, problem: 429 }, ['option problem', '429']],
    ['onWarning console', { windows, onWarning: 'console' }, ['option onWarning', '"console"']],
    ['rule empty', { windows, rule: '' }, ['option rule', '""']],
    ['rule 5', { windows, rule: 5 }, ['option rule', 'got 5']],
    ['a rule function with inline windows', { windows, rule: () => 'api' }, ['option rule as a function', 'windows']],
    ['countOnly errors', { windows, countOnly: 'errors' }, ['option countOnly', '"errors"']],
    ['refusal 429', { windows, refusal: 429 }, ['option refusal', '429']],
    ['neither limiter, rules nor windows', {}, ['need a rule']],
    ['rules and windows', { windows, rules: { api: { windows } } }, ['rules and windows']],
    ['algorithm without windows', { rules: { api: { windows } }, rule: 'api', algorithm: 'gcra' }, ['algorithm']],
    ['an unknown algorithm', { windows, algorithm: 'leaky' }, ['algorithm', '"leaky"']],
    ['rules without rule', { rules: { api: { windows } } }, ['option rule', 'api']],
    ['a rule not in rules', { rules: { api: { windows } }, rule: 'nope' }, ['"nope"', 'api']],
    ['a bad window', { windows: [{ limit: 0, period: '1m' }] }, ['limit', '0']],
  ])('rejects %s', (_, options, shown) => {
    expectConfigError(() => createRateLimit(options as RateLimitOptions<Req>), ...shown)
  })

  it('rejects options that are not an object', () => {
    expectConfigError(() => createRateLimit(null as unknown as RateLimitOptions<Req>), 'must be an object', 'null')
    expectConfigError(() => createRateLimit([] as unknown as RateLimitOptions<Req>), 'must be an object', '[]')
  })

  it('rejects a limiter together with rules, windows or store', () => {
    const limiter = limiterOf({ api: { windows } })
    expectConfigError(() => createRateLimit({ limiter, windows }), 'limiter and windows')
    expectConfigError(() => createRateLimit({ limiter, rules: { api: { windows } }, rule: 'api' }), 'limiter and rules')
    expectConfigError(() => createRateLimit({ limiter, rule: 'api', store: memoryStore() }), 'option store')
  })

  it("rejects a rule that is not the limiter's, naming the rules it holds", () => {
    const limiter = limiterOf({ api: { windows }, search: { windows } })
    expectConfigError(() => createRateLimit({ limiter, rule: 'login' }), '"login"', 'api, search')
    expectConfigError(() => createRateLimit({ limiter }), 'option rule', 'api, search')
  })

  it('rejects a limiter that is not a Limiter', () => {
    expectConfigError(
      () => createRateLimit({ limiter: { rules: new Map() } as unknown as Limiter, rule: 'api' }),
      'option limiter',
    )
  })

  it('accepts every valid value', () => {
    for (const headers of ['draft-10', 'draft-8', 'draft-7', 'draft-6', 'legacy', false] as const) {
      for (const quotaUnit of ['request', 'content-bytes', 'concurrent-requests', 'concurrency'] as const) {
        rateLimit({ windows, headers, quotaUnit, partitionKey: true, cost: 0, dryRun: true, ipv6Subnet: 128 })
      }
    }
    for (const countOnly of ['failures', 'successes', () => true] as const) rateLimit({ windows, countOnly })
    rateLimit({ windows, refusal: (_decision, _request, standard) => standard })
    rateLimit({ rules: { api: { windows } }, rule: () => 'api' })
    rateLimit({ windows, onStoreError: 'deny', storeTimeoutMs: 1 })
    rateLimit({ windows, onStoreError: 'allow', storeTimeoutMs: 60_000, algorithm: 'gcra' })
  })

  // Regression: the limiter (and its sweep timer) was made before the other options were checked.
  it('leaves no timer behind when an option is rejected', () => {
    vi.useFakeTimers()
    expect(() => createRateLimit({ windows, headers: 'draft-9' as 'draft-10' })).toThrow(TollgateConfigError)
    expect(vi.getTimerCount()).toBe(0)
  })
})

describe('createRateLimit: check', () => {
  it('answers an allowed request with continue and draft-10 headers', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 2, period: '1m' }] })
    expect(limit.rule).toBe('inline:sliding-log:2/1m')
    const verdict = await limit.check({}, view())
    expect(verdict).toEqual({
      action: 'continue',
      headers: {
        'RateLimit-Policy': '"2-in-1m";q=2;w=60',
        RateLimit: '"2-in-1m";r=1;t=60',
      },
      decision: {
        allowed: true,
        reason: 'ok',
        rule: 'inline:sliding-log:2/1m',
        cost: 1,
        retryAfterMs: 0,
        nowMs: T,
        windows: [
          {
            rule: 'inline:sliding-log:2/1m',
            identifier: 'ip:203.0.113.7',
            limit: 2,
            periodMs: 60_000,
            remaining: 1,
            resetAtMs: T + 60_000,
            failed: false,
          },
        ],
      },
    })
  })

  it('answers a refusal with a complete 429 problem response', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE })
    await limit.check({}, view())
    const verdict = await limit.check({}, view())
    const problem = {
      type: QUOTA_EXCEEDED,
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Quota exceeded for 1-in-1m; retry in 60 s.',
      'violated-policies': ['1-in-1m'],
      'identifier-kinds': ['ip'],
      'retry-after': 60,
    }
    expect(verdict).toMatchObject({
      action: 'respond',
      status: 429,
      contentType: 'application/problem+json',
      headers: {
        'Retry-After': '60',
        'RateLimit-Policy': '"1-in-1m";q=1;w=60',
        RateLimit: '"1-in-1m";r=0;t=60',
      },
      problem,
      decision: { allowed: false, reason: 'limited', retryAfterMs: 60_000 },
    })
    expect(verdict.action === 'respond' && JSON.parse(String(verdict.body))).toEqual(problem)
  })

  it('sends Retry-After on a refusal even with headers: false, and nothing else', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, headers: false })
    expect((await limit.check({}, view())).headers).toEqual({})
    expect((await limit.check({}, view())).headers).toEqual({ 'Retry-After': '60' })
  })

  // Regression: such a request was a 429 without Retry-After, which clients retry for nothing.
  it('answers 413 without Retry-After when the cost never fits', async () => {
    for (const headers of ['draft-10', false] as const) {
      const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 5, period: '1m' }], cost: 6, headers })
      const verdict = await limit.check({}, view())
      expect(verdict).toMatchObject({
        action: 'respond',
        status: 413,
        contentType: 'application/problem+json',
        problem: {
          status: 413,
          'retry-after': null,
          detail:
            'This request costs 6, more than 5-in-1m admits (5); retrying will not help, a smaller request may pass.',
        },
      })
      expect(verdict.headers).not.toHaveProperty('Retry-After')
    }
  })

  it('uses the configured header format', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 3, period: '10s' }], headers: 'legacy' })
    expect((await limit.check({}, view())).headers).toEqual({
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '2',
      'X-RateLimit-Reset': String((T + 10_000) / 1000),
    })
  })

  it('passes quotaUnit and partitionKey to the headers', async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: [{ limit: 1_000, period: '1m' }],
      quotaUnit: 'content-bytes',
      partitionKey: true,
    })
    const { headers } = await limit.check({}, view())
    expect(headers['RateLimit-Policy']).toBe('"1000-in-1m";q=1000;w=60;qu="content-bytes"')
    expect(headers.RateLimit).toMatch(/^"1000-in-1m";r=999;t=60;pk=:[A-Za-z0-9+/]{16}:$/)
  })

  it('keys pk with the secret it is given, the same on every server', async () => {
    const secret = 'one secret for all servers'
    const pkOf = async () =>
      (
        await rateLimit({ store: memoryStore(), windows: [{ limit: 9, period: '1m' }], partitionKey: secret }).check(
          {},
          view(),
        )
      ).headers.RateLimit
    expect(await pkOf()).toBe(await pkOf())
    expect(() =>
      rateLimit({ store: memoryStore(), windows: [{ limit: 9, period: '1m' }], partitionKey: 'short' }),
    ).toThrow(/partitionKey must be a boolean or a secret of at least 16 characters, got "short"/)
  })

  it('skips: continue, no headers, no decision, nothing charged', async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: ONE_PER_MINUTE,
      skip: (req) => req.path === '/health',
    })
    expect(await limit.check({ path: '/health' }, view())).toEqual({
      action: 'continue',
      headers: {},
      decision: undefined,
    })
    expect(await limit.check({ path: '/health' }, view())).toEqual({
      action: 'continue',
      headers: {},
      decision: undefined,
    })
    const counted = await limit.check({ path: '/' }, view())
    expect(counted.action).toBe('continue')
    expect(counted.decision?.windows[0]?.remaining).toBe(0)
  })

  it('awaits an async skip', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, skip: async () => true })
    expect((await limit.check({}, view())).decision).toBeUndefined()
    expect((await limit.limiter.peek(limit.rule as string, 'ip:203.0.113.7')).windows[0]?.remaining).toBe(1)
  })
})

describe('createRateLimit: identity', () => {
  async function identifierOf(limit: RateLimit<Req>, ip: string | undefined): Promise<string | undefined> {
    return (await limit.check({}, ip === undefined ? NO_ADDRESS : view(ip))).decision?.windows[0]?.identifier
  }

  it('counts IPv4 and IPv4-mapped IPv6 as the same client', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE })
    expect(await identifierOf(limit, '203.0.113.7')).toBe('ip:203.0.113.7')
    expect(await identifierOf(limit, '::ffff:203.0.113.7')).toBe('ip:203.0.113.7')
    expect((await limit.check({}, view('::ffff:203.0.113.7'))).action).toBe('respond')
  })

  it('groups IPv6 clients by /56', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE })
    expect(await identifierOf(limit, '2001:db8:1234:56ab::1')).toBe('ip:2001:db8:1234:5600::/56')
    const sameSubnet = await limit.check({}, view('2001:db8:1234:56ff:ffff::2'))
    expect(sameSubnet.action).toBe('respond')
    expect(await identifierOf(limit, '2001:db8:1234:5700::1')).toBe('ip:2001:db8:1234:5700::/56')
  })

  it('honours ipv6Subnet', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, ipv6Subnet: 64 })
    expect(await identifierOf(limit, '2001:db8:1234:56ab::1')).toBe('ip:2001:db8:1234:56ab::/64')
    expect(await identifierOf(limit, '2001:db8:1234:56ac::1')).toBe('ip:2001:db8:1234:56ac::/64')
  })

  it('counts requests without an address as ip:unknown and warns once', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 5, period: '1m' }], onWarning })
    expect(await identifierOf(limit, undefined)).toBe('ip:unknown')
    expect(await identifierOf(limit, '')).toBe('ip:unknown')
    expect(await identifierOf(limit, undefined)).toBe('ip:unknown')
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('ip:unknown'), 'TG_NO_CLIENT_ADDRESS')
  })

  it('warns once when X-Forwarded-For arrives while no proxy is trusted', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 5, period: '1m' }], onWarning })
    await limit.check({}, view('10.0.0.1', { forwardedFor: '198.51.100.1' }))
    await limit.check({}, view('10.0.0.1', { forwardedFor: ['198.51.100.2', '198.51.100.3'] }))
    await limit.check({}, view('10.0.0.1', { forwardedFor: '' }))
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('X-Forwarded-For'), 'TG_UNTRUSTED_FORWARDED_FOR')
  })

  it('does not warn about X-Forwarded-For behind a trusted proxy, or without one', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 5, period: '1m' }], onWarning })
    await limit.check({}, view('198.51.100.1', { forwardedFor: '198.51.100.1', proxyTrusted: true }))
    await limit.check({}, view('198.51.100.1'))
    expect(onWarning).not.toHaveBeenCalled()
  })

  // Regression: with Fastify 5's trustProxy: 1 (which trusts no peer) every client behind the proxy
  // counted as the proxy, and no warning fired because a proxy was trusted.
  it("warns once when X-Forwarded-For arrives but the address decided on is the peer's", async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 5, period: '1m' }], onWarning })
    const behindProxy = { forwardedFor: '203.0.113.7', proxyTrusted: true, socketAddress: '127.0.0.1' }
    await limit.check({}, view('203.0.113.7', behindProxy))
    expect(onWarning).not.toHaveBeenCalled()
    await limit.check({}, view('127.0.0.1', behindProxy))
    await limit.check({}, view('127.0.0.1', behindProxy))
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('connecting peer'), 'TG_FORWARDED_FOR_UNUSED')
  })

  // Regression: 'X-Forwarded-For: 203.0.113.7:51234', as some load balancers send it, made every
  // request a TG_INVALID_ARGUMENT rejection (a 500), uncounted.
  it.each([
    ['203.0.113.7:51234', '203.0.113.7', 'ip:203.0.113.7'],
    ['[2001:db8::1]:443', '2001:db8::1', 'ip:2001:db8::/56'],
  ])('counts the address %s without its port, as %s', async (withPort, plain, identifier) => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 2, period: '1m' }], onWarning })
    expect(await identifierOf(limit, withPort)).toBe(identifier)
    expect(await identifierOf(limit, plain)).toBe(identifier)
    expect((await limit.check({}, view(withPort))).action).toBe('respond')
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('port'), 'TG_UNPARSEABLE_CLIENT_ADDRESS')
  })

  // Regression: 'X-Forwarded-For: unknown' made every request a 500, uncounted.
  it('counts an address that does not parse under a digest of its text, and warns once', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 2, period: '1m' }], onWarning })
    const unknown = await identifierOf(limit, 'unknown')
    expect(unknown).toMatch(/^ip:#[A-Za-z0-9_-]{27}$/)
    expect(await identifierOf(limit, 'unknown')).toBe(unknown)
    expect((await limit.check({}, view('unknown'))).action).toBe('respond')
    const other = await identifierOf(limit, '203.0.113.7:99999')
    expect(other).toMatch(/^ip:#/)
    expect(other).not.toBe(unknown)
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(
      expect.stringContaining('not an IP address'),
      'TG_UNPARSEABLE_CLIENT_ADDRESS',
    )
  })

  it('emits process warnings by default', async () => {
    const emitWarning = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    try {
      const limit = createRateLimit<Req>({ store: memoryStore(), windows: ONE_PER_MINUTE })
      opened.push(limit)
      await limit.check({}, NO_ADDRESS)
      expect(emitWarning).toHaveBeenCalledWith(expect.stringContaining('ip:unknown'), { code: 'TG_NO_CLIENT_ADDRESS' })
    } finally {
      emitWarning.mockRestore()
    }
  })

  it('passes identify the request and the client view, and charges every identifier it returns', async () => {
    const identify = vi.fn((req: Req, client: ClientView) => [client.ipIdentifier as string, `user:${req.user}`])
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, identify })
    const verdict = await limit.check({ user: 'alice' }, view('::ffff:203.0.113.7'))
    expect(identify).toHaveBeenCalledWith(
      { user: 'alice' },
      { ip: '::ffff:203.0.113.7', ipIdentifier: 'ip:203.0.113.7' },
    )
    expect(verdict.decision?.windows.map((w) => [w.identifier, w.remaining])).toEqual([
      ['ip:203.0.113.7', 0],
      ['user:alice', 0],
    ])
  })

  it('does not warn about a missing address when identify decides', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, identify: () => 'key:1', onWarning })
    await limit.check({}, NO_ADDRESS)
    expect(onWarning).not.toHaveBeenCalled()
  })

  // Regression: a user id of 20,000 characters made the decision throw (a 500), and the address
  // that sent it was not charged either.
  it('counts an over-long user id as its kind and a digest, and still charges the address', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({
      store: memoryStore(),
      windows: [{ limit: 2, period: '1m' }],
      identify: byIpAndUser((req) => req.user),
      onWarning,
    })
    const long = 'x'.repeat(20_000)
    const first = await limit.check({ user: long }, view('198.51.100.1'))
    const ids = first.decision?.windows.map((w) => w.identifier)
    expect(ids?.[0]).toBe('ip:198.51.100.1')
    expect(ids?.[1]).toMatch(/^user:#[A-Za-z0-9_-]{27}$/)
    expect((await limit.check({ user: long }, view('198.51.100.2'))).decision?.windows[1]?.identifier).toBe(ids?.[1])
    expect(await limit.check({ user: long }, view('198.51.100.3'))).toMatchObject({ action: 'respond', status: 429 })
    expect(await limit.check({}, view('198.51.100.1'))).toMatchObject({ action: 'continue' })
    expect(await limit.check({}, view('198.51.100.1'))).toMatchObject({ action: 'respond', status: 429 })
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('16,384'), 'TG_UNUSABLE_IDENTIFIER')
  })

  // Regression: a username that arrived as a JSON object made userIdentifier throw (a 500), and the
  // address was not charged.
  it('counts a request whose user id userIdentifier refuses for its address alone', async () => {
    const onWarning = vi.fn()
    const limit = rateLimit({
      store: memoryStore(),
      windows: ONE_PER_MINUTE,
      identify: byIpAndUser((req) => req.user),
      onWarning,
    })
    for (const user of [{ $ne: null }, 1.5, Number.NaN] as unknown as number[]) {
      const verdict = await limit.check({ user }, view(`198.51.100.${String(user).length}`))
      expect(verdict.decision?.windows.map((w) => w.identifier)).toEqual([`ip:198.51.100.${String(user).length}`])
    }
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('TollgateArgumentError'), 'TG_UNUSABLE_IDENTIFIER')
  })

  it('leaves out what identify returns that is not an identifier, keeps repeats once, and falls back to the address', async () => {
    const onWarning = vi.fn()
    let returned: unknown
    const limit = rateLimit({
      store: memoryStore(),
      windows: [{ limit: 5, period: '1m' }],
      identify: () => returned as string,
      onWarning,
    })
    const identifiers = async (value: unknown) => {
      returned = value
      return (await limit.check({}, view())).decision?.windows.map((w) => w.identifier)
    }
    expect(await identifiers(['user:1', 42, '', null, 'user:1'])).toEqual(['user:1'])
    expect(await identifiers([])).toEqual(['ip:203.0.113.7'])
    expect(await identifiers(undefined)).toEqual(['ip:203.0.113.7'])
    expect(await identifiers(['key:a', 'key:b'])).toEqual(['key:a', 'key:b'])
    expect(onWarning.mock.calls.map(([, code]) => code)).toEqual(['TG_UNUSABLE_IDENTIFIER', 'TG_UNUSABLE_IDENTIFIER'])
  })

  it('rejects when identify throws, without charging', async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: ONE_PER_MINUTE,
      identify: () => {
        throw new Error('no session')
      },
    })
    await expect(limit.check({}, view())).rejects.toThrow('no session')
  })
})

describe('createRateLimit: inline windows', () => {
  it('names inline windows after what they count, windows in order of period', () => {
    expect(rateLimit({ windows: [{ limit: 100, period: '1m' }] }).rule).toBe('inline:sliding-log:100/1m')
    expect(
      rateLimit({
        windows: [
          { limit: 20, period: 60_000 },
          { limit: 5, period: '3s' },
        ],
        algorithm: 'gcra',
      }).rule,
    ).toBe('inline:gcra:5/3s,20/1m')
    expect(rateLimit({ windows: [{ limit: 1, period: '1500ms' }], rule: 'login' }).rule).toBe('login')
  })

  it("shows clients what each inline window admits, not the rule's name, in headers and problem bodies", async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: [
        { limit: 20, period: 60_000 },
        { limit: 1, period: '1500ms' },
      ],
      algorithm: 'gcra',
    })
    const admitted = await limit.check({}, view())
    expect(admitted.headers['RateLimit-Policy']).toBe('"20-in-1m";q=20;w=60, "1-in-1500ms";q=1;w=2')
    const refused = await limit.check({}, view())
    expect(refused).toMatchObject({ action: 'respond', status: 429, problem: { 'violated-policies': ['1-in-1500ms'] } })
    // A named rule keeps its name in both.
    const named = rateLimit({ store: memoryStore(), windows: [{ limit: 1, period: '1m' }], rule: 'login' })
    expect((await named.check({}, view())).headers['RateLimit-Policy']).toBe('"login-60s";q=1;w=60')
  })

  // Regression: every middleware's inline windows were rule 'default', so on one store five
  // requests through a 100 a minute middleware made the first through a 2 a minute one a 429.
  it('keeps two middlewares with different inline windows on one store apart', async () => {
    const store = memoryStore()
    const wide = rateLimit({ store, windows: [{ limit: 100, period: '1m' }] })
    const narrow = rateLimit({ store, windows: [{ limit: 2, period: '1m' }] })
    for (let i = 0; i < 5; i++) expect((await wide.check({}, view())).action).toBe('continue')
    const first = await narrow.check({}, view())
    expect(first.action).toBe('continue')
    expect(first.headers.RateLimit).toBe('"2-in-1m";r=1;t=60')
  })

  it('lets middlewares with the same inline windows share their counts, as documented', async () => {
    const store = memoryStore()
    const a = rateLimit({ store, windows: [{ limit: 2, period: '1m' }] })
    const b = rateLimit({ store, windows: [{ limit: 2, period: 60_000 }] })
    await a.check({}, view())
    await b.check({}, view())
    expect((await a.check({}, view())).action).toBe('respond')
  })

  it('names inline windows too long to spell out by their algorithm and a digest, the same each time', () => {
    const windows = Array.from(
      { length: 8 },
      (_, i): WindowOptions => ({ limit: 1_000_000_000 + i, period: `${i + 1}s` }),
    )
    const name = rateLimit({ windows, algorithm: 'token-bucket' }).rule
    expect(name).toMatch(/^inline:token-bucket:#[A-Za-z0-9_-]{27}$/)
    expect(rateLimit({ windows, algorithm: 'token-bucket' }).rule).toBe(name)
  })

  it("names invalid inline windows 'inline' in the error", () => {
    expectConfigError(
      () => createRateLimit({ windows: [{ limit: 0, period: '1m' }] }),
      "rule 'inline', window 0: limit",
    )
    expectConfigError(
      () => createRateLimit({ windows: [{ limit: 1, period: 'soon' as Duration }] }),
      "rule 'inline', window 0",
    )
  })
})

describe('createRateLimit: a sliding-window counter', () => {
  // Regression: a counter full in its current window frees its next unit only once that window has
  // become the previous one, and the RateLimit field said t=80 of a 60 s window.
  it('never reports t past its window, while Retry-After keeps the exact wait', async () => {
    const store = new MemoryStore({ clock: () => T + 40_000, sweepIntervalMs: 0 })
    const limit = rateLimit({ store, windows: ONE_PER_MINUTE, algorithm: 'sliding-window' })
    const admitted = await limit.check({}, view())
    expect(admitted.decision?.windows[0]?.resetAtMs).toBe(T + 120_000)
    expect(admitted.headers.RateLimit).toBe('"1-in-1m";r=0;t=60')
    const refused = await limit.check({}, view())
    expect(refused.headers).toMatchObject({
      'Retry-After': '80',
      RateLimit: '"1-in-1m";r=0;t=60',
    })
  })
})

describe('createRateLimit: the window a policy advertises', () => {
  // w is whole seconds. A 1.5 s window advertised as w=1 would have a client that paces itself by
  // the policy send 5 a second against 5 per 1.5 s; rounded up, to w=2, it is never refused.
  it.each(['sliding-log', 'fixed-window', 'token-bucket', 'gcra'] as const)(
    '%s: a client sending q requests every w seconds is never refused, for windows of odd lengths',
    async (algorithm) => {
      for (const period of ['1500ms', '2500ms', '700ms'] as const) {
        let now = T
        const store = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
        const limit = rateLimit({ store, windows: [{ limit: 5, period }], algorithm })
        const policy = (await limit.limiter.peek(limit.rule as string, 'ip:203.0.113.7')).windows[0]
        const first = await limit.check({}, view())
        const [, q, w] = /;q=(\d+);w=(\d+)$/.exec(first.headers['RateLimit-Policy'] ?? '') ?? []
        expect(Number(q)).toBe(policy?.limit)
        const refusals: string[] = []
        for (let burst = 0; burst < 4; burst++) {
          for (let i = burst === 0 ? 1 : 0; i < Number(q); i++) {
            if ((await limit.check({}, view())).action === 'respond') refusals.push(`${period} at ${now - T} ms`)
          }
          now += Number(w) * 1000
        }
        expect(refusals).toEqual([])
      }
    },
  )
})

describe('createRateLimit: the options an adapter adds', () => {
  // Regression: the Koa and Fastify errors for an unknown option listed every option but theirs.
  it('lists them among the known options of an unknown-option error', () => {
    expectConfigError(
      () => createRateLimit({ windows: ONE_PER_MINUTE, thorw: true } as RateLimitOptions<Req>, ['throw']),
      "unknown option 'thorw'",
      "'onWarning', 'ignoreWarnings', 'throw'",
    )
    const base = rateLimit({ windows: ONE_PER_MINUTE })
    expectConfigError(
      () => createRouteRateLimit(base, { hok: 'x' } as Partial<RateLimitOptions<Req>>, 'GET /', ['hook']),
      "unknown option 'hok'",
      "'hook'",
    )
  })
})

describe('createRateLimit: cost', () => {
  it('charges a fixed cost', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: [{ limit: 10, period: '1m' }], cost: 4 })
    expect((await limit.check({}, view())).headers.RateLimit).toBe('"10-in-1m";r=6;t=60')
  })

  it('charges cost 0 without counting', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, cost: 0 })
    await limit.check({}, view())
    expect((await limit.check({}, view())).headers.RateLimit).toBe('"1-in-1m";r=1;t=0')
  })

  it('charges what a cost function returns', async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: [{ limit: 100, period: '1m' }],
      cost: (req) => req.bytes ?? 0,
    })
    expect((await limit.check({ bytes: 60 }, view())).headers.RateLimit).toBe('"100-in-1m";r=40;t=60')
    const refused = await limit.check({ bytes: 41 }, view())
    expect(refused).toMatchObject({ action: 'respond', status: 429, decision: { cost: 41 } })
  })

  it('awaits an async cost function', async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: [{ limit: 100, period: '1m' }],
      cost: async (req) => req.bytes ?? 0,
    })
    const verdict = await limit.check({ bytes: 25 }, view())
    expect(verdict.decision).toMatchObject({ cost: 25, windows: [{ remaining: 75 }] })
  })

  it('rejects a cost function that returns an unusable cost', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, cost: () => -1 })
    await expect(limit.check({}, view())).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
  })
})

describe('createRateLimit: dryRun, onLimited and problem', () => {
  it('dryRun lets a would-be refusal through, reports r=0 and calls onLimited with dry-run', async () => {
    const onLimited = vi.fn()
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, dryRun: true, onLimited })
    await limit.check({}, view())
    expect(onLimited).not.toHaveBeenCalled()
    const verdict = await limit.check({ path: '/x' }, view())
    expect(verdict).toMatchObject({
      action: 'continue',
      headers: {
        'RateLimit-Policy': '"1-in-1m";q=1;w=60',
        RateLimit: '"1-in-1m";r=0;t=60',
      },
      decision: { allowed: true, reason: 'dry-run', windows: [{ failed: true, remaining: 0 }] },
    })
    expect(verdict.headers).not.toHaveProperty('Retry-After')
    expect(onLimited).toHaveBeenCalledTimes(1)
    expect(onLimited).toHaveBeenCalledWith({ path: '/x' }, verdict.decision)
  })

  // Regression: a dry-run decision answered allowed: true with retryAfterMs 60000, though an
  // allowed decision has nothing to wait for.
  it.each([...HEADERS_FORMATS, false as const])(
    'answers a dry-run refusal with retryAfterMs 0 and no Retry-After (headers %s; it said retry in 60 s)',
    async (headers) => {
      const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, dryRun: true, headers })
      await limit.check({}, view())
      const verdict = await limit.check({}, view())
      expect(verdict.action).toBe('continue')
      expect(verdict.decision).toMatchObject({ allowed: true, reason: 'dry-run', retryAfterMs: 0 })
      expect(verdict.decision?.windows).toEqual([expect.objectContaining({ failed: true, remaining: 0 })])
      expect(verdict.headers).not.toHaveProperty('Retry-After')
    },
  )

  it('calls onLimited, awaited, for every refusal and never for a pass', async () => {
    const seen: Array<[Req, Decision['reason']]> = []
    const onLimited = vi.fn(async (req: Req, decision: Decision) => {
      await Promise.resolve()
      seen.push([req, decision.reason])
    })
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, onLimited })
    await limit.check({ path: '/a' }, view())
    await limit.check({ path: '/b' }, view())
    await limit.check({ path: '/c' }, view())
    expect(seen).toEqual([
      [{ path: '/b' }, 'limited'],
      [{ path: '/c' }, 'limited'],
    ])
  })

  it('sends a custom problem body, built from the decision and the request', async () => {
    const limit = rateLimit({
      store: memoryStore(),
      windows: ONE_PER_MINUTE,
      problem: async (decision, req) => ({
        type: 'https://example.com/problems/slow-down',
        title: 'Slow down',
        status: 429,
        instance: req.path,
        retryInMs: decision.retryAfterMs,
      }),
    })
    await limit.check({ path: '/orders' }, view())
    const verdict = await limit.check({ path: '/orders' }, view())
    const problem = {
      type: 'https://example.com/problems/slow-down',
      title: 'Slow down',
      status: 429,
      instance: '/orders',
      retryInMs: 60_000,
    }
    expect(verdict).toMatchObject({ action: 'respond', status: 429, contentType: 'application/problem+json', problem })
    expect(verdict.action === 'respond' && verdict.body).toBe(JSON.stringify(problem))
    expect(verdict.headers['Retry-After']).toBe('60')
  })
})

describe('createRateLimit: store failure', () => {
  const failing: Store = {
    evaluate: () => Promise.reject(new Error('connection refused')),
    reset: () => Promise.reject(new Error('connection refused')),
    close: () => Promise.resolve(),
  }

  it('fails open by default: continue, no headers', async () => {
    const limit = rateLimit({ store: failing, windows: ONE_PER_MINUTE })
    expect(await limit.check({}, view())).toMatchObject({
      action: 'continue',
      headers: {},
      decision: { allowed: true, reason: 'store-error-allowed', windows: [] },
    })
  })

  it("answers 503 with Retry-After when the policy is 'deny', without calling onLimited", async () => {
    const onLimited = vi.fn()
    for (const headers of ['draft-10', 'legacy', false] as const) {
      const limit = rateLimit({ store: failing, windows: ONE_PER_MINUTE, onStoreError: 'deny', headers, onLimited })
      const verdict = await limit.check({}, view())
      expect(verdict).toMatchObject({
        action: 'respond',
        status: 503,
        contentType: 'application/problem+json',
        headers: { 'Retry-After': '1' },
        problem: { type: 'about:blank', status: 503, 'retry-after': 1 },
        decision: { allowed: false, reason: 'store-error-denied', retryAfterMs: 1_000 },
      })
      expect(Object.keys(verdict.headers)).toEqual(['Retry-After'])
    }
    expect(onLimited).not.toHaveBeenCalled()
  })

  it("answers 503 with Retry-After to a request refused for a full backlog (reason 'overloaded'), without calling onLimited", async () => {
    const onLimited = vi.fn()
    const answers: Array<(result: StoreResult) => void> = []
    const waiting: Store = {
      evaluate: () => new Promise((resolve) => answers.push(resolve)),
      reset: async () => {},
      close: async () => {},
    }
    const limiter = createLimiter({
      store: waiting,
      rules: { api: { windows: ONE_PER_MINUTE } },
      backlog: { max: 1 },
      onWarning: () => {},
    })
    opened.push(limiter)
    const limit = rateLimit({ limiter, rule: 'api', onLimited })
    const first = limit.check({}, view())
    const verdict = await limit.check({}, view())
    expect(verdict).toMatchObject({
      action: 'respond',
      status: 503,
      contentType: 'application/problem+json',
      headers: { 'Retry-After': '1' },
      problem: { type: 'about:blank', status: 503, 'retry-after': 1 },
      decision: { allowed: false, reason: 'overloaded', retryAfterMs: 1_000 },
    })
    expect(onLimited).not.toHaveBeenCalled()
    answers[0]?.({ allowed: true, nowMs: 0, windows: [{ remaining: 0, resetAtMs: 60_000, fitsAtMs: 0 }] })
    expect(await first).toMatchObject({ action: 'continue', decision: { reason: 'ok' } })
  })

  it("overrides a passed-in limiter's policy", async () => {
    const limiter = limiterOf({ api: { windows: ONE_PER_MINUTE } }, failing)
    const limit = rateLimit({ limiter, rule: 'api', onStoreError: 'deny' })
    expect(await limit.check({}, view())).toMatchObject({ action: 'respond', status: 503 })
  })

  it('bounds the wait for the store with storeTimeoutMs', async () => {
    vi.useFakeTimers()
    const silent: Store = { evaluate: () => new Promise(() => {}), reset: async () => {}, close: async () => {} }
    const limit = rateLimit({ store: silent, windows: ONE_PER_MINUTE, storeTimeoutMs: 20 })
    const verdict = limit.check({}, view())
    await vi.advanceTimersByTimeAsync(20)
    expect(await verdict).toMatchObject({
      action: 'continue',
      decision: { reason: 'store-error-allowed', error: { code: 'TG_STORE' } },
    })
  })
})

describe('createRateLimit: close', () => {
  it('closes a limiter it made', async () => {
    const limit = createRateLimit<Req>({ store: memoryStore(), windows: ONE_PER_MINUTE })
    await limit.close()
    await expect(limit.limiter.consume(limit.rule as string, 'ip:203.0.113.7')).rejects.toMatchObject({
      code: 'TG_CLOSED',
    })
    await expect(limit.check({}, view())).rejects.toBeInstanceOf(TollgateError)
  })

  it('closes the store of a limiter it made', async () => {
    const store = memoryStore()
    const close = vi.spyOn(store, 'close')
    await createRateLimit<Req>({ store, windows: ONE_PER_MINUTE }).close()
    expect(close).toHaveBeenCalledTimes(1)
  })

  it('leaves a passed-in limiter open', async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 5, period: '1m' }] } })
    const limit = createRateLimit<Req>({ limiter, rule: 'api' })
    expect(limit.limiter).toBe(limiter)
    await limit.close()
    expect(await limiter.consume('api', 'ip:203.0.113.7')).toMatchObject({ allowed: true, reason: 'ok' })
  })
})

describe('createRouteRateLimit', () => {
  const rules: RulesOptions = {
    api: { windows: [{ limit: 3, period: '1m' }] },
    search: { windows: [{ limit: 10, period: '1m' }], parent: 'api' },
  }

  function route(
    base: RateLimit<Req>,
    options: Partial<RateLimitOptions<Req>>,
    routeId = 'POST /upload',
  ): RateLimit<Req> {
    const engine = createRouteRateLimit(base, options, routeId)
    opened.push(engine)
    return engine
  }

  it("decides a route naming only a rule with the app's limiter, sharing its state", async () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    const search = route(base, { rule: 'search' })
    expect(search.limiter).toBe(base.limiter)
    expect(search.rule).toBe('search')
    expect((await search.check({}, view())).headers.RateLimit).toBe('"search-60s";r=9;t=60, "api-60s";r=2;t=60')
    await search.check({}, view())
    expect((await base.check({}, view())).headers.RateLimit).toBe('"api-60s";r=0;t=60')
    expect(await search.check({}, view())).toMatchObject({ action: 'respond', status: 429 })
  })

  it("does not close the app's limiter when a route sharing it closes", async () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    await createRouteRateLimit(base, { rule: 'search' }).close()
    expect((await base.check({}, view())).action).toBe('continue')
  })

  it('names inline windows after a route id too long for a rule name by its start and a digest', () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    const routeId = `GET /${'segment/'.repeat(40)}`
    const engine = createRouteRateLimit(base, { windows: ONE_PER_MINUTE }, routeId)
    opened.push(engine)
    expect(engine.rule).toHaveLength(128)
    expect((engine.rule as string).startsWith('GET /segment/')).toBe(true)
    expect(engine.rule).toMatch(/#[A-Za-z0-9_-]{27}$/)
  })

  it('asks a route with windows of its own for a name when it has no route id', () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    expect(() => createRouteRateLimit(base, { windows: [{ limit: 2, period: '10s' }] })).toThrow(/needs option rule/)
  })

  it('gives a route with its own windows a limiter of its own', async () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    const upload = route(base, { windows: [{ limit: 2, period: '10s' }] })
    expect(upload.limiter).not.toBe(base.limiter)
    expect(upload.rule).toBe('POST /upload')
    expect((await upload.check({}, view())).headers.RateLimit).toBe('"POST /upload-10s";r=1;t=10')
    expect((await base.check({}, view())).headers.RateLimit).toBe('"api-60s";r=2;t=60')
  })

  // Regression: a route's inline windows were named 'default', like the app's, and shared their keys.
  it("keeps a route's own windows apart from the app's inline windows on the same store", async () => {
    const base = rateLimit({ store: memoryStore(), windows: [{ limit: 2, period: '1m' }] })
    const upload = route(base, { windows: [{ limit: 100, period: '1m' }] })
    await upload.check({}, view())
    await upload.check({}, view())
    expect((await base.check({}, view())).action).toBe('continue')
  })

  // Regression: the route's limiter owned the store it inherited and closed it.
  it("does not close the app's store when a route with its own windows closes", async () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    const upload = createRouteRateLimit(base, { windows: [{ limit: 2, period: '10s' }] }, 'POST /upload')
    for (let i = 0; i < 3; i++) await base.check({}, view())
    await upload.close()
    expect(await base.check({}, view())).toMatchObject({ action: 'respond', status: 429 })
  })

  // A RedisStore answers its decisions through a receiver: the route's view of the app's store
  // keeps that way rather than falling back to a promise per decision.
  it("asks the app's store through its receiver for a route with its own windows", async () => {
    const asked: string[] = []
    const store = {
      evaluate: () => Promise.reject(new Error('evaluate is not the path taken')),
      [Symbol.for('tollgate.answersInto')]: (request: StoreRequest, receiver: StoreReceiver) => {
        asked.push(request.targets[0]?.rule ?? '')
        receiver.answer({ allowed: true, nowMs: T, windows: [{ remaining: 1, resetAtMs: T + 10_000, fitsAtMs: T }] })
      },
      reset: async () => {},
      close: async () => {},
    } satisfies Store
    const base = rateLimit({ store, rules, rule: 'api' })
    const upload = route(base, { windows: [{ limit: 2, period: '10s' }] })
    expect((await upload.check({}, view())).headers.RateLimit).toBe('"POST /upload-10s";r=1;t=10')
    // The route's state name: its rule's name, then a digest of its windows.
    expect(asked).toEqual([expect.stringMatching(/^POST \/upload@/)])
  })

  // Regression: with a limiter passed in, a route's own windows went to a fresh MemoryStore.
  it("puts a route's own windows on the store of the app's passed-in limiter", async () => {
    const store = memoryStore()
    const base = rateLimit({ limiter: limiterOf(rules, store), rule: 'api' })
    const upload = route(base, { windows: [{ limit: 2, period: '10s' }] })
    await upload.check({}, view())
    // The route's state is on the app's store.
    expect(store.size).toBe(1)
  })

  it("keeps the app's rule and limiter when a route overrides headers", async () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    const legacy = route(base, { headers: 'legacy' })
    expect(legacy.limiter).toBe(base.limiter)
    expect(legacy.rule).toBe('api')
    expect((await legacy.check({}, view())).headers).toEqual({
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '2',
      'X-RateLimit-Reset': String((T + 60_000) / 1000),
    })
  })

  it("inherits the app's other options", async () => {
    const onLimited = vi.fn()
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api', headers: 'draft-6', cost: 2, onLimited })
    const search = route(base, { rule: 'search' })
    expect((await search.check({}, view())).headers).toMatchObject({ 'RateLimit-Remaining': '1' })
    await search.check({}, view())
    expect(onLimited).toHaveBeenCalledTimes(1)
  })

  it('rejects unknown route keys and invalid route values', () => {
    const base = rateLimit({ store: memoryStore(), rules, rule: 'api' })
    expectConfigError(
      () => createRouteRateLimit(base, { rateLimit: 5 } as Partial<RateLimitOptions<Req>>),
      "'rateLimit'",
    )
    expectConfigError(() => createRouteRateLimit(base, { rule: 'nope' }), '"nope"')
    expectConfigError(() => createRouteRateLimit(base, { headers: 'draft-9' as 'draft-10' }), '"draft-9"')
    expectConfigError(
      () => createRouteRateLimit(base, 'x' as unknown as Partial<RateLimitOptions<Req>>),
      'route rate limit options',
    )
  })
})

describe('byIpAndUser', () => {
  const client: ClientView = { ip: '203.0.113.7', ipIdentifier: 'ip:203.0.113.7' }

  it('counts the address and the user', async () => {
    const identify = byIpAndUser((req: Req) => req.user)
    expect(await identify({ user: 'alice' }, client)).toEqual(['ip:203.0.113.7', 'user:alice'])
    expect(await identify({ user: 42 }, client)).toEqual(['ip:203.0.113.7', 'user:42'])
  })

  it.each([undefined, null, ''])('counts the address alone when the user is %j', async (user) => {
    expect(await byIpAndUser((req: Req) => req.user)({ user }, client)).toEqual(['ip:203.0.113.7'])
  })

  it('awaits an async userOf', async () => {
    const identify = byIpAndUser(async (req: Req) => req.user)
    expect(await identify({ user: 'bob' }, client)).toEqual(['ip:203.0.113.7', 'user:bob'])
    expect(await identify({}, client)).toEqual(['ip:203.0.113.7'])
  })

  it("uses the engine's ip:unknown without an address", async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, identify: byIpAndUser((r) => r.user) })
    const verdict = await limit.check({ user: 'alice' }, NO_ADDRESS)
    expect(verdict.decision?.windows.map((w) => w.identifier)).toEqual(['ip:unknown', 'user:alice'])
  })

  it('charges both identifiers in one decision through createRateLimit', async () => {
    const limit = rateLimit({ store: memoryStore(), windows: ONE_PER_MINUTE, identify: byIpAndUser((r) => r.user) })
    const first = await limit.check({ user: 'alice' }, view('198.51.100.1'))
    expect(first.decision?.windows.map((w) => w.identifier)).toEqual(['ip:198.51.100.1', 'user:alice'])
    const otherAddress = await limit.check({ user: 'alice' }, view('198.51.100.2'))
    expect(otherAddress).toMatchObject({ action: 'respond', status: 429 })
    expect(otherAddress.decision?.windows.map((w) => [w.identifier, w.failed])).toEqual([
      ['ip:198.51.100.2', false],
      ['user:alice', true],
    ])
    expect((await limit.check({}, view('198.51.100.2'))).action).toBe('continue')
  })
})
