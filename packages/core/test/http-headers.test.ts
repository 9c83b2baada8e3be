import { createHmac } from 'node:crypto'
import { type BareItem, type Item, type List, parseList } from 'structured-headers'
import { describe, expect, it } from 'vitest'
import { type HeaderOptions, type HeadersFormat, rateLimitHeaders } from '../src/http/headers.js'
import { policyName } from '../src/http/policy-name.js'
import type { Decision } from '../src/rules/decision.js'
import { NOW, windowState } from './decision-fixtures.js'

const IP = 'ip:203.0.113.7'
const USER = 'user:alice'

const DRAFT_10: HeaderOptions = { format: 'draft-10', quotaUnit: 'request', partitionKeySecret: undefined }
const SECRET = 'a partition key secret'

function decision(overrides: Partial<Decision> = {}): Decision {
  return {
    allowed: true,
    reason: 'ok',
    rule: 'api',
    cost: 1,
    retryAfterMs: 0,
    nowMs: NOW,
    windows: [windowState()],
    ...overrides,
  }
}

/** A refusal by the 3 s window of `api`, 2.1 s before it frees enough room. */
function limitedDecision(overrides: Partial<Decision> = {}): Decision {
  return decision({
    allowed: false,
    reason: 'limited',
    retryAfterMs: 2_100,
    windows: [
      windowState(),
      windowState({ limit: 5, periodMs: 3_000, remaining: 0, resetAtMs: NOW + 2_100, failed: true }),
    ],
    ...overrides,
  })
}

/** Each list member as [name, parameters], checked to be an Item rather than an Inner List. */
function items(field: string | undefined): Array<[BareItem, Map<string, BareItem>]> {
  expect(field).toBeDefined()
  const list: List = parseList(field as string)
  return list.map((member) => {
    expect(Array.isArray(member[0])).toBe(false)
    const [value, parameters] = member as Item
    return [value, parameters]
  })
}

function onlyItem(field: string | undefined): [BareItem, Map<string, BareItem>] {
  const all = items(field)
  expect(all).toHaveLength(1)
  return all[0] as [BareItem, Map<string, BareItem>]
}

function digest(identifier: string): Buffer {
  return createHmac('sha256', SECRET).update(identifier, 'utf16le').digest().subarray(0, 12)
}

describe('rateLimitHeaders: draft-10', () => {
  it('writes one RateLimit-Policy and one RateLimit item per window', () => {
    const headers = rateLimitHeaders(limitedDecision(), DRAFT_10)
    expect(headers).toEqual({
      'Retry-After': '3',
      'RateLimit-Policy': '"api-60s";q=20;w=60, "api-3s";q=5;w=3',
      RateLimit: '"api-60s";r=7;t=13, "api-3s";r=0;t=3',
    })
    expect(items(headers['RateLimit-Policy'])).toEqual([
      [
        'api-60s',
        new Map([
          ['q', 20],
          ['w', 60],
        ]),
      ],
      [
        'api-3s',
        new Map([
          ['q', 5],
          ['w', 3],
        ]),
      ],
    ])
    expect(items(headers.RateLimit)).toEqual([
      [
        'api-60s',
        new Map([
          ['r', 7],
          ['t', 13],
        ]),
      ],
      [
        'api-3s',
        new Map([
          ['r', 0],
          ['t', 3],
        ]),
      ],
    ])
  })

  it('names items as Strings, not Tokens', () => {
    const [name] = onlyItem(rateLimitHeaders(decision(), DRAFT_10)['RateLimit-Policy'])
    expect(typeof name).toBe('string')
  })

  it.each([
    [500, 'api-500ms', 1],
    [1, 'api-1ms', 1],
    [999, 'api-999ms', 1],
    [1_000, 'api-1s', 1],
    [1_001, 'api-1001ms', 2],
    [1_500, 'api-1500ms', 2],
    [86_400_000, 'api-86400s', 86_400],
  ])('gives a period of %i ms the name %s and w=%i (whole seconds, rounded up, never 0)', (periodMs, name, w) => {
    const headers = rateLimitHeaders(decision({ windows: [windowState({ periodMs })] }), DRAFT_10)
    const [value, parameters] = onlyItem(headers['RateLimit-Policy'])
    expect(value).toBe(name)
    expect(parameters.get('w')).toBe(w)
  })

  it.each([
    [NOW + 12_100, 13],
    [NOW + 12_000, 12],
    [NOW + 1, 1],
    [NOW, 0],
    [NOW - 500, 0],
    [NOW - 60_000, 0],
  ])('gives a window resetting at %i t=%i (seconds from the decision, rounded up, never negative)', (resetAtMs, t) => {
    const headers = rateLimitHeaders(decision({ windows: [windowState({ resetAtMs })] }), DRAFT_10)
    const [, parameters] = onlyItem(headers.RateLimit)
    expect(parameters.get('t')).toBe(t)
  })

  // Regression: a sliding-window counter full in its current window reported t=80 on a 60 s window.
  it.each<[HeadersFormat, string, string]>([
    ['draft-10', 'RateLimit', '"api-60s";r=0;t=60'],
    ['draft-7', 'RateLimit', 'limit=20, remaining=0, reset=60'],
    ['draft-6', 'RateLimit-Reset', '60'],
    ['legacy', 'X-RateLimit-Reset', String(Math.ceil((NOW + 60_000) / 1000))],
  ])('never reports a reset past the window (%s)', (format, field, value) => {
    const refused = limitedDecision({
      retryAfterMs: 80_000,
      windows: [windowState({ remaining: 0, resetAtMs: NOW + 80_000, failed: true })],
    })
    const headers = rateLimitHeaders(refused, { ...DRAFT_10, format })
    expect(headers[field]).toBe(value)
    expect(headers['Retry-After']).toBe('80')
  })

  it('omits qu for the default unit, request', () => {
    const headers = rateLimitHeaders(decision(), DRAFT_10)
    expect(headers['RateLimit-Policy']).toBe('"api-60s";q=20;w=60')
    const [, parameters] = onlyItem(headers['RateLimit-Policy'])
    expect(parameters.has('qu')).toBe(false)
  })

  it.each(['content-bytes', 'concurrent-requests'] as const)(
    'sends qu=%s as a String on RateLimit-Policy only',
    (quotaUnit) => {
      const headers = rateLimitHeaders(decision(), { ...DRAFT_10, quotaUnit })
      expect(headers['RateLimit-Policy']).toBe(`"api-60s";q=20;w=60;qu="${quotaUnit}"`)
      expect(headers.RateLimit).toBe('"api-60s";r=7;t=13')
      const [, parameters] = onlyItem(headers['RateLimit-Policy'])
      expect(parameters.get('qu')).toBe(quotaUnit)
      expect(typeof parameters.get('qu')).toBe('string')
    },
  )

  // Regression: quotaUnit 'concurrency' went out as qu="concurrency", a unit the draft's registry
  // does not hold; it names concurrent requests "concurrent-requests".
  it('sends the older name concurrency as the registered unit, concurrent-requests', () => {
    const headers = rateLimitHeaders(decision(), { ...DRAFT_10, quotaUnit: 'concurrency' })
    expect(headers['RateLimit-Policy']).toBe('"api-60s";q=20;w=60;qu="concurrent-requests"')
  })

  it("writes 'draft-8', express-rate-limit's name for these fields, exactly as 'draft-10'", () => {
    for (const options of [
      DRAFT_10,
      { ...DRAFT_10, quotaUnit: 'content-bytes' as const, partitionKeySecret: SECRET },
    ]) {
      expect(rateLimitHeaders(limitedDecision(), { ...options, format: 'draft-8' })).toEqual(
        rateLimitHeaders(limitedDecision(), options),
      )
    }
  })

  // Regression: pk was an unkeyed digest (an IPv4 identifier is recovered by trying all 2^32) and
  // rode on RateLimit-Policy too, which then changed with the tightest identifier.
  it('sends pk on RateLimit only, as a 12-byte Byte Sequence HMAC of the identifier', () => {
    const headers = rateLimitHeaders(decision(), { ...DRAFT_10, partitionKeySecret: SECRET })
    const expected = digest(IP)
    expect(headers['RateLimit-Policy']).toBe('"api-60s";q=20;w=60')
    expect(headers.RateLimit).toBe(`"api-60s";r=7;t=13;pk=:${expected.toString('base64')}:`)
    const [, parameters] = onlyItem(headers.RateLimit)
    const pk = parameters.get('pk')
    expect(pk).toBeInstanceOf(ArrayBuffer)
    expect(Buffer.from(pk as ArrayBuffer)).toEqual(expected)
    const other = rateLimitHeaders(decision(), { ...DRAFT_10, partitionKeySecret: 'another secret, another key' })
    expect(other.RateLimit).not.toBe(headers.RateLimit)
  })

  it('gives different identifiers different partition keys and does not reveal them', () => {
    const pkOf = (identifier: string) =>
      rateLimitHeaders(decision({ windows: [windowState({ identifier })] }), {
        ...DRAFT_10,
        partitionKeySecret: SECRET,
      }).RateLimit
    expect(pkOf(IP)).not.toBe(pkOf('ip:203.0.113.8'))
    expect(pkOf(IP)).not.toContain('203.0.113.7')
  })

  it('puts qu on the policy and pk on the current state when both are asked for', () => {
    const headers = rateLimitHeaders(decision(), {
      format: 'draft-10',
      quotaUnit: 'content-bytes',
      partitionKeySecret: SECRET,
    })
    expect([...onlyItem(headers['RateLimit-Policy'])[1].keys()]).toEqual(['q', 'w', 'qu'])
    expect([...onlyItem(headers.RateLimit)[1].keys()]).toEqual(['r', 't', 'pk'])
  })

  it.each([
    ['say "hi"', '"say \\"hi\\"-60s"', 'say "hi"-60s'],
    ['back\\slash', '"back\\\\slash-60s"', 'back\\slash-60s'],
    ['"\\"', '"\\"\\\\\\"-60s"', '"\\"-60s'],
    ['café', '"caf%C3%A9-60s"', 'caf%C3%A9-60s'],
    ['日本', '"%E6%97%A5%E6%9C%AC-60s"', '%E6%97%A5%E6%9C%AC-60s'],
    ['tab\there', '"tab%09here-60s"', 'tab%09here-60s'],
    ['del\x7f', '"del%7F-60s"', 'del%7F-60s'],
  ])('escapes the rule name %j into a valid String item', (rule, serialized, parsed) => {
    const headers = rateLimitHeaders(decision({ rule, windows: [windowState({ rule })] }), DRAFT_10)
    expect(headers['RateLimit-Policy']).toBe(`${serialized};q=20;w=60`)
    expect(headers.RateLimit).toBe(`${serialized};r=7;t=13`)
    expect(items(headers['RateLimit-Policy'])[0]?.[0]).toBe(parsed)
    expect(items(headers.RateLimit)[0]?.[0]).toBe(parsed)
    expect(parsed).toBe(policyName(rule, 60_000))
  })

  // Regression: encodeURIComponent threw URIError on a lone surrogate.
  it('writes headers for a rule name holding a lone surrogate', () => {
    const rule = 'api\ud800'
    const headers = rateLimitHeaders(decision({ rule, windows: [windowState({ rule })] }), DRAFT_10)
    expect(items(headers.RateLimit)).toHaveLength(1)
  })

  it('writes one item per (rule, period), the failed identifier speaking even with more remaining', () => {
    const headers = rateLimitHeaders(
      limitedDecision({
        windows: [
          windowState({ identifier: IP, remaining: 2, failed: false }),
          windowState({ identifier: USER, remaining: 9, resetAtMs: NOW + 40_000, failed: true }),
        ],
      }),
      DRAFT_10,
    )
    expect(headers['RateLimit-Policy']).toBe('"api-60s";q=20;w=60')
    expect(headers.RateLimit).toBe('"api-60s";r=9;t=40')
  })

  it('lets the identifier with the fewest remaining speak when none failed', () => {
    const headers = rateLimitHeaders(
      decision({
        windows: [
          windowState({ identifier: IP, remaining: 4, resetAtMs: NOW + 5_000 }),
          windowState({ identifier: USER, remaining: 1, resetAtMs: NOW + 50_000 }),
          windowState({ identifier: IP, periodMs: 3_000, limit: 5, remaining: 3, resetAtMs: NOW + 1_000 }),
          windowState({ identifier: USER, periodMs: 3_000, limit: 5, remaining: 4, resetAtMs: NOW + 2_000 }),
        ],
      }),
      { ...DRAFT_10, partitionKeySecret: SECRET },
    )
    const userPk = `:${digest(USER).toString('base64')}:`
    const ipPk = `:${digest(IP).toString('base64')}:`
    expect(headers.RateLimit).toBe(`"api-60s";r=1;t=50;pk=${userPk}, "api-3s";r=3;t=1;pk=${ipPk}`)
    expect(headers['RateLimit-Policy']).toBe('"api-60s";q=20;w=60, "api-3s";q=5;w=3')
  })

  it('breaks a tie on remaining by the later reset', () => {
    const headers = rateLimitHeaders(
      decision({
        windows: [
          windowState({ identifier: IP, remaining: 3, resetAtMs: NOW + 5_000 }),
          windowState({ identifier: USER, remaining: 3, resetAtMs: NOW + 9_000 }),
        ],
      }),
      DRAFT_10,
    )
    expect(headers.RateLimit).toBe('"api-60s";r=3;t=9')
  })

  it("includes the parents' windows, in the decision's order", () => {
    const headers = rateLimitHeaders(
      decision({
        rule: 'auth.createToken',
        windows: [
          windowState({ rule: 'auth.createToken', limit: 5, periodMs: 3_000, remaining: 4, resetAtMs: NOW + 3_000 }),
          windowState({ rule: 'api', limit: 1_000, periodMs: 3_600_000, remaining: 998, resetAtMs: NOW + 3_599_100 }),
        ],
      }),
      DRAFT_10,
    )
    expect(headers).toEqual({
      'RateLimit-Policy': '"auth.createToken-3s";q=5;w=3, "api-3600s";q=1000;w=3600',
      RateLimit: '"auth.createToken-3s";r=4;t=3, "api-3600s";r=998;t=3600',
    })
  })

  it('keeps windows of different rules with the same period apart', () => {
    const headers = rateLimitHeaders(
      decision({ windows: [windowState({ rule: 'search' }), windowState({ rule: 'api', remaining: 1 })] }),
      DRAFT_10,
    )
    expect(headers.RateLimit).toBe('"search-60s";r=7;t=13, "api-60s";r=1;t=13')
  })

  // Items are kept per (rule, period) between responses; another limiter's rule of the same name
  // and period but another limit, or another unit, must still get its own.
  it('writes each limit and unit of a (rule, period) as it is, response after response', () => {
    const policyOf = (limit: number, options: HeaderOptions = DRAFT_10) =>
      rateLimitHeaders(decision({ windows: [windowState({ limit, periodMs: 45_000 })] }), options)['RateLimit-Policy']
    const bytes: HeaderOptions = { ...DRAFT_10, quotaUnit: 'content-bytes' }
    for (let round = 0; round < 2; round++) {
      expect(policyOf(5)).toBe('"api-45s";q=5;w=45')
      expect(policyOf(7)).toBe('"api-45s";q=7;w=45')
      expect(policyOf(7, bytes)).toBe('"api-45s";q=7;w=45;qu="content-bytes"')
      expect(policyOf(7)).toBe('"api-45s";q=7;w=45')
    }
  })
})

describe('rateLimitHeaders: single-policy formats', () => {
  it('draft-7: RateLimit for the refusing window and a RateLimit-Policy of every window', () => {
    expect(rateLimitHeaders(limitedDecision(), { ...DRAFT_10, format: 'draft-7' })).toEqual({
      'Retry-After': '3',
      'RateLimit-Policy': '20;w=60, 5;w=3',
      RateLimit: 'limit=5, remaining=0, reset=3',
    })
  })

  it('draft-6: RateLimit-Limit, -Remaining and -Reset for the refusing window', () => {
    expect(rateLimitHeaders(limitedDecision(), { ...DRAFT_10, format: 'draft-6' })).toEqual({
      'Retry-After': '3',
      'RateLimit-Policy': '20;w=60, 5;w=3',
      'RateLimit-Limit': '5',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '3',
    })
  })

  it('legacy: X-RateLimit-* with the reset as epoch seconds, rounded up', () => {
    expect(rateLimitHeaders(limitedDecision(), { ...DRAFT_10, format: 'legacy' })).toEqual({
      'Retry-After': '3',
      'X-RateLimit-Limit': '5',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '1763712003',
    })
    const late = decision({ windows: [windowState({ resetAtMs: NOW + 2_150 })] })
    expect(rateLimitHeaders(late, { ...DRAFT_10, format: 'legacy' })['X-RateLimit-Reset']).toBe('1763712004')
  })

  it('reports the window with the fewest remaining when none refused, the longer period on a tie', () => {
    const allowed = decision({
      windows: [
        windowState({ limit: 20, periodMs: 60_000, remaining: 2, resetAtMs: NOW + 30_000 }),
        windowState({ limit: 5, periodMs: 3_000, remaining: 2, resetAtMs: NOW + 1_000 }),
        windowState({ limit: 1_000, periodMs: 3_600_000, remaining: 500, resetAtMs: NOW + 100_000 }),
      ],
    })
    expect(rateLimitHeaders(allowed, { ...DRAFT_10, format: 'draft-7' })).toEqual({
      'RateLimit-Policy': '20;w=60, 5;w=3, 1000;w=3600',
      RateLimit: 'limit=20, remaining=2, reset=30',
    })
  })

  it('reports the refusing window that frees up last when several refuse', () => {
    const refused = limitedDecision({
      windows: [
        windowState({ limit: 20, periodMs: 60_000, remaining: 0, resetAtMs: NOW + 30_000, failed: true }),
        windowState({ limit: 5, periodMs: 3_000, remaining: 0, resetAtMs: NOW + 1_000, failed: true }),
      ],
      retryAfterMs: 30_000,
    })
    expect(rateLimitHeaders(refused, { ...DRAFT_10, format: 'draft-6' })).toMatchObject({
      'Retry-After': '30',
      'RateLimit-Limit': '20',
      'RateLimit-Reset': '30',
    })
  })

  it('writes one policy per (rule, period) with several identifiers', () => {
    const twoIdentifiers = decision({
      windows: [
        windowState({ identifier: IP, remaining: 6 }),
        windowState({ identifier: USER, remaining: 3 }),
        windowState({ identifier: IP, limit: 5, periodMs: 3_000, remaining: 4, resetAtMs: NOW + 100 }),
        windowState({ identifier: USER, limit: 5, periodMs: 3_000, remaining: 5, resetAtMs: NOW }),
      ],
    })
    expect(rateLimitHeaders(twoIdentifiers, { ...DRAFT_10, format: 'draft-7' })).toEqual({
      'RateLimit-Policy': '20;w=60, 5;w=3',
      RateLimit: 'limit=20, remaining=3, reset=13',
    })
  })

  // w is whole seconds. 1.5 s rounds up to w=2, never down to w=1: a client sending q every w
  // seconds must not outrun the limit (see the pacing test in http-rate-limit.test.ts).
  it.each([
    [1_500, 2],
    [2_001, 3],
    [59_999, 60],
    [60_000, 60],
  ])('advertises a %i ms window as w=%i, in every format', (periodMs, w) => {
    const odd = decision({ windows: [windowState({ periodMs, limit: 5, remaining: 4, resetAtMs: NOW + periodMs })] })
    const name = policyName('api', periodMs)
    expect(rateLimitHeaders(odd, DRAFT_10)['RateLimit-Policy']).toBe(`"${name}";q=5;w=${w}`)
    expect(rateLimitHeaders(odd, { ...DRAFT_10, format: 'draft-7' })['RateLimit-Policy']).toBe(`5;w=${w}`)
    expect(rateLimitHeaders(odd, { ...DRAFT_10, format: 'draft-6' })['RateLimit-Policy']).toBe(`5;w=${w}`)
    // t never claims more than w.
    expect(rateLimitHeaders(odd, DRAFT_10).RateLimit).toBe(`"${name}";r=4;t=${w}`)
  })

  it('writes w=1 for sub-second periods', () => {
    const short = decision({ windows: [windowState({ periodMs: 500, limit: 2, remaining: 1, resetAtMs: NOW + 400 })] })
    expect(rateLimitHeaders(short, { ...DRAFT_10, format: 'draft-6' })).toEqual({
      'RateLimit-Policy': '2;w=1',
      'RateLimit-Limit': '2',
      'RateLimit-Remaining': '1',
      'RateLimit-Reset': '1',
    })
  })
})

describe('rateLimitHeaders: Retry-After', () => {
  const formats: HeadersFormat[] = ['draft-10', 'draft-8', 'draft-7', 'draft-6', 'legacy']

  it.each([
    [2_100, '3'],
    [2_000, '2'],
    [1_001, '2'],
    [1_000, '1'],
    [1, '1'],
    [0, '1'],
  ])('answers a refusal %i ms from fitting with Retry-After %s (seconds rounded up, at least 1)', (ms, seconds) => {
    for (const format of formats) {
      const headers = rateLimitHeaders(limitedDecision({ retryAfterMs: ms }), { ...DRAFT_10, format })
      expect(headers['Retry-After']).toBe(seconds)
    }
  })

  it('leaves Retry-After out when the request can never fit', () => {
    const never = limitedDecision({ cost: 50, retryAfterMs: Number.POSITIVE_INFINITY })
    for (const format of formats) {
      const headers = rateLimitHeaders(never, { ...DRAFT_10, format })
      expect(headers).not.toHaveProperty('Retry-After')
      expect(Object.keys(headers).length).toBeGreaterThan(0)
    }
  })

  it('leaves Retry-After out of allowed and dry-run decisions', () => {
    const dryRun = limitedDecision({ allowed: true, reason: 'dry-run' })
    for (const format of formats) {
      expect(rateLimitHeaders(decision(), { ...DRAFT_10, format })).not.toHaveProperty('Retry-After')
      expect(rateLimitHeaders(dryRun, { ...DRAFT_10, format })).not.toHaveProperty('Retry-After')
    }
    expect(rateLimitHeaders(dryRun, DRAFT_10)).toEqual({
      'RateLimit-Policy': '"api-60s";q=20;w=60, "api-3s";q=5;w=3',
      RateLimit: '"api-60s";r=7;t=13, "api-3s";r=0;t=3',
    })
  })

  it('sends Retry-After alone when the store failed and the policy denies', () => {
    const denied = decision({ allowed: false, reason: 'store-error-denied', retryAfterMs: 1_000, windows: [] })
    for (const format of formats) {
      expect(rateLimitHeaders(denied, { ...DRAFT_10, format })).toEqual({ 'Retry-After': '1' })
    }
  })

  it('sends nothing when the store failed and the policy allows', () => {
    const allowed = decision({ reason: 'store-error-allowed', windows: [] })
    for (const format of formats) {
      expect(rateLimitHeaders(allowed, { format, quotaUnit: 'content-bytes', partitionKeySecret: SECRET })).toEqual({})
    }
  })
})
