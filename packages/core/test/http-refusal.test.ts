import { describe, expect, it } from 'vitest'
import type { RefusalResponse, StandardRefusal } from '../src/http/rate-limit-options.js'
import type { Decision } from '../src/rules/decision.js'
import type { Store } from '../src/stores/store.js'
import { TollgateArgumentError } from '../src/support/errors.js'
import { engine, memoryStore, view } from './http-fixtures.js'

interface Req {
  accept?: string
}

const ONE_PER_MINUTE = [{ limit: 1, period: '1m' }] as const
const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

/** The second request's verdict, on a rule of one per minute refused by `refusal`. */
async function refusedBy(refusal: (decision: Decision, request: Req, standard: StandardRefusal) => RefusalResponse) {
  const limit = engine<Req>({ store: memoryStore(), rule: 'api', windows: ONE_PER_MINUTE, refusal })
  await limit.check({}, view())
  return limit.check({ accept: 'text/html' }, view())
}

describe('refusal', () => {
  it('is given the decision, the request and the standard refusal, and its response is sent', async () => {
    const calls: Array<[Decision, Req, StandardRefusal]> = []
    const verdict = await refusedBy((decision, request, standard) => {
      calls.push([decision, request, standard])
      return { status: 429, contentType: 'text/html; charset=utf-8', body: '<p>Slow down.</p>' }
    })
    const [[decision, request, standard] = []] = calls
    expect(decision).toMatchObject({ reason: 'limited', rule: 'api' })
    expect(request).toEqual({ accept: 'text/html' })
    expect(standard).toEqual({
      status: 429,
      headers: { 'Retry-After': '60', 'RateLimit-Policy': '"api-60s";q=1;w=60', RateLimit: '"api-60s";r=0;t=60' },
      contentType: 'application/problem+json',
      body: expect.objectContaining({ type: QUOTA_EXCEEDED, status: 429, 'violated-policies': ['api-60s'] }),
    })
    expect(verdict).toEqual({
      action: 'respond',
      status: 429,
      // Kept, since the response named none of them.
      headers: standard?.headers,
      contentType: 'text/html; charset=utf-8',
      body: '<p>Slow down.</p>',
      problem: standard?.body,
      decision,
    })
  })

  it('sets its headers over the standard ones, replacing a field of the same name in any case', async () => {
    const verdict = await refusedBy((_, __, standard) => ({
      ...standard,
      headers: { 'retry-after': '120', 'Cache-Control': 'no-store', 'content-type': 'application/vnd.api+json' },
      body: { errors: [{ status: '429' }] },
    }))
    expect(verdict).toMatchObject({
      status: 429,
      headers: {
        'RateLimit-Policy': '"api-60s";q=1;w=60',
        RateLimit: '"api-60s";r=0;t=60',
        'retry-after': '120',
        'Cache-Control': 'no-store',
      },
      contentType: 'application/vnd.api+json',
      body: '{"errors":[{"status":"429"}]}',
    })
    expect(verdict.headers).not.toHaveProperty('Retry-After')
    expect(verdict.headers).not.toHaveProperty('content-type')
  })

  it('may change the status alone and keep the problem body', async () => {
    const verdict = await refusedBy((_, __, standard) => ({ ...standard, status: 503 }))
    expect(verdict).toMatchObject({ status: 503, contentType: 'application/problem+json' })
    expect(verdict.action === 'respond' && JSON.parse(String(verdict.body))).toMatchObject({ type: QUOTA_EXCEEDED })
  })

  it.each<[string, unknown, string, string | Buffer]>([
    ['a string', 'slow down', 'text/plain; charset=utf-8', 'slow down'],
    ['bytes', new Uint8Array([1, 2, 3]), 'application/octet-stream', Buffer.from([1, 2, 3])],
    ['an object', { error: 'slow down' }, 'application/json', '{"error":"slow down"}'],
    ['null', null, 'application/json', 'null'],
    ['no body', undefined, 'text/plain; charset=utf-8', ''],
  ])('sends %s with a content type of its own kind unless told one', async (_, body, contentType, sent) => {
    const verdict = await refusedBy(() => ({ status: 429, body }))
    expect(verdict).toMatchObject({ status: 429, contentType })
    expect(verdict.action === 'respond' && verdict.body).toEqual(sent)
  })

  it('builds the response to a store failure too, which decision.reason tells apart', async () => {
    const failing: Store = {
      evaluate: () => Promise.reject(new Error('connect ECONNREFUSED')),
      reset: () => Promise.reject(new Error('connect ECONNREFUSED')),
      close: async () => {},
    }
    const limit = engine<Req>({
      store: failing,
      windows: ONE_PER_MINUTE,
      onStoreError: 'deny',
      refusal: (decision, _, standard) => ({ ...standard, body: `${decision.reason} ${standard.status}` }),
    })
    expect(await limit.check({}, view())).toMatchObject({
      status: 503,
      headers: { 'Retry-After': '1' },
      body: 'store-error-denied 503',
    })
  })

  it('starts from 413 and the problem() body for a request that can never fit', async () => {
    const limit = engine<Req>({
      store: memoryStore(),
      windows: ONE_PER_MINUTE,
      cost: 2,
      problem: () => ({ type: 'about:blank', title: 'Too large', status: 413 }),
      refusal: (_, __, standard) => standard,
    })
    const verdict = await limit.check({}, view())
    expect(verdict).toMatchObject({ status: 413, problem: { title: 'Too large' } })
    expect(verdict.headers).not.toHaveProperty('Retry-After')
  })

  it.each<[string, unknown, string]>([
    ['no object', 429, 'option refusal must return a response object, got 429'],
    ['status 99', { status: 99 }, 'option refusal returned status 99; it must be an integer from 200 to 599'],
    ['status "429"', { status: '429' }, 'option refusal returned status "429"'],
    ['headers of numbers', { status: 429, headers: { 'Retry-After': 60 } }, 'header Retry-After: 60'],
    ['a body JSON cannot hold', { status: 429, body: () => 'x' }, 'a body JSON cannot represent'],
  ])('fails the request with a TollgateArgumentError when it returns %s', async (_, returned, message) => {
    const failure = await refusedBy(() => returned as RefusalResponse).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(TollgateArgumentError)
    expect((failure as Error).message).toContain(message)
  })
})
