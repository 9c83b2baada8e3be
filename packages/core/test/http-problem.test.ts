import { describe, expect, it } from 'vitest'
import { quotaExceededProblem, storeUnavailableProblem } from '../src/http/problem.js'
import type { Decision } from '../src/rules/decision.js'
import { TollgateError } from '../src/support/errors.js'
import { NOW, windowState } from './decision-fixtures.js'

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const QUOTA_EXCEEDED_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded'

function limitedDecision(overrides: Partial<Decision> = {}): Decision {
  return {
    allowed: false,
    reason: 'limited',
    rule: 'api',
    cost: 1,
    retryAfterMs: 2_100,
    nowMs: NOW,
    windows: [
      windowState(),
      windowState({ limit: 5, periodMs: 3_000, remaining: 0, resetAtMs: NOW + 2_100, failed: true }),
    ],
    ...overrides,
  }
}

describe('quotaExceededProblem', () => {
  it('is a 429 quota-exceeded problem naming only the refusing windows', () => {
    expect(quotaExceededProblem(limitedDecision())).toEqual({
      type: QUOTA_EXCEEDED,
      title: QUOTA_EXCEEDED_TITLE,
      status: 429,
      detail: 'Quota exceeded for api-3s; retry in 3 s.',
      'violated-policies': ['api-3s'],
      'identifier-kinds': ['ip'],
      'retry-after': 3,
    })
  })

  it('names each refusing (rule, period) once, across identifiers and parents', () => {
    const problem = quotaExceededProblem(
      limitedDecision({
        rule: 'auth.createToken',
        retryAfterMs: 40_000,
        windows: [
          windowState({ rule: 'auth.createToken', identifier: 'ip:203.0.113.7', periodMs: 3_000, failed: true }),
          windowState({ rule: 'auth.createToken', identifier: 'user:alice', periodMs: 3_000, failed: true }),
          windowState({ rule: 'api', identifier: 'ip:203.0.113.7', periodMs: 3_600_000, failed: false }),
          windowState({ rule: 'api', identifier: 'user:alice', periodMs: 3_600_000, failed: true }),
        ],
      }),
    )
    expect(problem['violated-policies']).toEqual(['auth.createToken-3s', 'api-3600s'])
    expect(problem['identifier-kinds']).toEqual(['ip', 'user'])
    expect(problem.detail).toBe('Quota exceeded for auth.createToken-3s, api-3600s; retry in 40 s.')
    expect(problem['retry-after']).toBe(40)
  })

  it.each([
    [1, 1],
    [999, 1],
    [1_000, 1],
    [1_001, 2],
    [59_999, 60],
  ])('rounds a retry %i ms away up to %i s', (retryAfterMs, seconds) => {
    expect(quotaExceededProblem(limitedDecision({ retryAfterMs }))['retry-after']).toBe(seconds)
  })

  // Regression: a request costing more than a window ever admits was a 429 without Retry-After,
  // which clients retry with backoff for nothing.
  it('is a 413 when the request costs more than a window can ever admit, saying retrying will not help', () => {
    const problem = quotaExceededProblem(
      limitedDecision({
        cost: 50,
        retryAfterMs: Number.POSITIVE_INFINITY,
        windows: [windowState({ remaining: 20, resetAtMs: NOW, failed: true })],
      }),
    )
    expect(problem).toEqual({
      type: QUOTA_EXCEEDED,
      title: QUOTA_EXCEEDED_TITLE,
      status: 413,
      detail:
        'This request costs 50, more than api-60s admits (20); retrying will not help, a smaller request may pass.',
      'violated-policies': ['api-60s'],
      'identifier-kinds': ['ip'],
      'retry-after': null,
    })
    expect(JSON.parse(JSON.stringify(problem))).toEqual(problem)
  })

  // Regression: the never-fits detail named every refusing window, not only those too small.
  it('names only the windows too small for the cost in the never-fits detail', () => {
    const problem = quotaExceededProblem(
      limitedDecision({
        cost: 10,
        retryAfterMs: Number.POSITIVE_INFINITY,
        windows: [
          windowState({ limit: 100, remaining: 3, failed: true }),
          windowState({ limit: 5, periodMs: 3_000, remaining: 5, resetAtMs: NOW, failed: true }),
        ],
      }),
    )
    expect(problem.detail).toBe(
      'This request costs 10, more than api-3s admits (5); retrying will not help, a smaller request may pass.',
    )
  })

  // Regression: a refusal named the tightest window but not whether the address or the user refused.
  it('names the kind of each refusing identifier, never the identifier itself', () => {
    const problem = quotaExceededProblem(
      limitedDecision({
        windows: [
          windowState({ identifier: 'ip:203.0.113.7', failed: false }),
          windowState({ identifier: 'user:alice@example.com', failed: true }),
          windowState({ identifier: 'alice@example.com', periodMs: 3_000, failed: true }),
          windowState({ identifier: 'tenant 42:x', periodMs: 3_000, failed: true }),
        ],
      }),
    )
    expect(problem['identifier-kinds']).toEqual(['user'])
    expect(JSON.stringify(problem)).not.toContain('alice')
    expect(JSON.stringify(problem)).not.toContain('tenant')
  })

  it('writes names that are safe in a header (non-ASCII percent-encoded)', () => {
    const problem = quotaExceededProblem(
      limitedDecision({ windows: [windowState({ rule: 'café', periodMs: 500, failed: true })] }),
    )
    expect(problem['violated-policies']).toEqual(['caf%C3%A9-500ms'])
  })
})

describe('storeUnavailableProblem', () => {
  it('is a 503 about:blank problem with retry-after in seconds', () => {
    const denied: Decision = {
      allowed: false,
      reason: 'store-error-denied',
      rule: 'api',
      cost: 1,
      retryAfterMs: 1_000,
      nowMs: NOW,
      windows: [],
      error: new TollgateError('TG_STORE', 'connection refused'),
    }
    expect(storeUnavailableProblem(denied)).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The rate limiter cannot reach its store, and this route refuses requests it cannot count.',
      'retry-after': 1,
    })
    expect(storeUnavailableProblem({ ...denied, retryAfterMs: 1_500 })['retry-after']).toBe(2)
    expect(storeUnavailableProblem({ ...denied, retryAfterMs: 0 })['retry-after']).toBe(1)
  })

  it('does not leak the store error into the body', () => {
    const denied: Decision = {
      allowed: false,
      reason: 'store-error-denied',
      rule: 'api',
      cost: 1,
      retryAfterMs: 1_000,
      nowMs: NOW,
      windows: [],
      error: new TollgateError('TG_STORE', 'NOAUTH redis://admin:secret@10.0.0.5'),
    }
    expect(JSON.stringify(storeUnavailableProblem(denied))).not.toContain('secret')
  })
})
