import type { Store } from '@tollgate/core'
import type { FastifyServerOptions } from 'fastify'
import { describe, expect, it, vi } from 'vitest'
import { appWith } from './app.js'

describe('the plugin-wide limit', () => {
  it('lets requests through up to the limit, then answers 429 with a problem body and draft-10 headers', async () => {
    const app = await appWith({ windows: [{ limit: 2, period: '10s' }] })
    const handler = vi.fn(async () => ({ ok: true }))
    app.get('/', handler)

    const first = await app.inject('/')
    expect(first.statusCode).toBe(200)
    expect(first.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
    expect(first.headers.ratelimit).toBe('"2-in-10s";r=1;t=10')
    const second = await app.inject('/')
    expect(second.statusCode).toBe(200)
    expect(second.headers.ratelimit).toBe('"2-in-10s";r=0;t=10')

    const refused = await app.inject('/')
    expect(refused.statusCode).toBe(429)
    // Fastify adds the charset to every string body it sends.
    expect(refused.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(refused.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
    expect(refused.headers.ratelimit).toBe('"2-in-10s";r=0;t=10')
    expect(refused.headers['retry-after']).toBe('10')
    expect(refused.json()).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Quota exceeded for 2-in-10s; retry in 10 s.',
      'violated-policies': ['2-in-10s'],
      'identifier-kinds': ['ip'],
      'retry-after': 10,
    })
    expect(handler).toHaveBeenCalledTimes(2)
  })

  it('answers 503 with its problem body when the store fails and onStoreError is deny', async () => {
    const failing: Store = {
      evaluate: () => Promise.reject(new Error('connection refused')),
      reset: () => Promise.resolve(),
      close: () => Promise.resolve(),
    }
    const app = await appWith({ store: failing, windows: [{ limit: 2, period: '10s' }], onStoreError: 'deny' })
    app.get('/', async () => ({ ok: true }))

    const response = await app.inject('/')
    expect(response.statusCode).toBe(503)
    expect(response.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(response.headers['retry-after']).toBe('1')
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The rate limiter cannot reach its store, and this route refuses requests it cannot count.',
      'retry-after': 1,
    })
  })

  it('passes an error thrown by identify to the error handler', async () => {
    const app = await appWith({
      windows: [{ limit: 2, period: '10s' }],
      identify: () => {
        throw new Error('no tenant')
      },
    })
    const seen: unknown[] = []
    app.setErrorHandler(async (error, _request, reply) => {
      seen.push(error)
      return reply.code(500).send({ handled: true })
    })
    app.get('/', async () => ({ ok: true }))

    const response = await app.inject('/')
    expect(response.statusCode).toBe(500)
    expect(response.json()).toEqual({ handled: true })
    expect(seen).toEqual([new Error('no tenant')])
  })

  it('sends no headers and counts nothing for a request skip returns true for', async () => {
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], skip: (request) => request.url === '/health' })
    app.get('/health', async (request) => ({ decision: request.rateLimit ?? null }))
    app.get('/', async () => ({ ok: true }))

    for (let i = 0; i < 3; i++) {
      const health = await app.inject('/health')
      expect(health.statusCode).toBe(200)
      expect(health.json()).toEqual({ decision: null })
      expect(health.headers.ratelimit).toBeUndefined()
    }
    expect((await app.inject('/')).headers.ratelimit).toBe('"1-in-10s";r=0;t=10')
  })

  it('tells clients apart by the forwarded address when Fastify trusts the proxy, without a warning', async () => {
    const onWarning = vi.fn()
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], onWarning }, { trustProxy: true })
    app.get('/', async (request) => ({ ip: request.ip }))

    const first = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.7' } })
    const other = await app.inject({ url: '/', headers: { 'x-forwarded-for': '198.51.100.9' } })
    const again = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.7' } })
    expect([first.statusCode, other.statusCode, again.statusCode]).toEqual([200, 200, 429])
    expect(first.json()).toEqual({ ip: '203.0.113.7' })
    expect(onWarning).not.toHaveBeenCalled()
  })

  it('learns that Fastify trusts a proxy without reading request.ips, which parses the chain again', async () => {
    const onWarning = vi.fn()
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], onWarning }, { trustProxy: true })
    let reads = 0
    // An app hook runs before the plugin's: it counts reads of the getter Fastify defines.
    app.addHook('onRequest', (request, _reply, done) => {
      const ips = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(request), 'ips')?.get
      expect(ips).toBeTypeOf('function')
      Object.defineProperty(request, 'ips', {
        get() {
          reads++
          return ips?.call(this)
        },
      })
      done()
    })
    app.get('/', async (request) => ({ ip: request.ip }))

    const first = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.7' } })
    const again = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.7' } })
    expect([first.statusCode, again.statusCode]).toEqual([200, 429])
    expect(reads).toBe(0)
    expect(onWarning).not.toHaveBeenCalled()
  })

  // What packages/fastify/README.md advises for a proxy, from that proxy's address (inject's remoteAddress).
  it.each<[string, FastifyServerOptions['trustProxy']]>([
    ["the proxy's address", '127.0.0.1'],
    ['its addresses as a list', ['127.0.0.1', '10.0.0.0/8']],
    ['true, for a server only the proxy can reach', true],
  ])('behind one proxy, trusting %s, counts each client apart, without a warning', async (_, trustProxy) => {
    const onWarning = vi.fn()
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], onWarning }, { trustProxy })
    app.get('/', async (request) => ({ ip: request.ip }))
    const via = (client: string) =>
      app.inject({ url: '/', remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': client } })

    const first = await via('203.0.113.7')
    expect(first.json()).toEqual({ ip: '203.0.113.7' })
    expect([(await via('198.51.100.9')).statusCode, (await via('203.0.113.7')).statusCode]).toEqual([200, 429])
    expect(onWarning).not.toHaveBeenCalled()
  })

  // Regression: the README advised trustProxy: 1 for one hop, which Fastify 5 takes as trusting no
  // peer: every client behind the proxy then counted as the proxy, and nothing warned.
  it('warns once when a hop count leaves every client counted as the proxy', async () => {
    const onWarning = vi.fn()
    // Plain JavaScript passes it; the types of recent Fastify 5 releases no longer take a number.
    const hops = { trustProxy: 1 } as unknown as FastifyServerOptions
    const app = await appWith({ windows: [{ limit: 5, period: '10s' }], onWarning }, hops)
    app.get('/', async (request) => ({ ip: request.ip }))
    const via = (client: string) =>
      app.inject({ url: '/', remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': client } })

    expect((await via('203.0.113.7')).json()).toEqual({ ip: '127.0.0.1' })
    const second = await via('198.51.100.9')
    expect(second.headers.ratelimit).toBe('"5-in-10s";r=3;t=10')
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.stringContaining('trustProxy: 1'), 'TG_FORWARDED_FOR_UNUSED')
  })

  it('warns once when X-Forwarded-For arrives and Fastify trusts no proxy', async () => {
    const onWarning = vi.fn()
    const app = await appWith({ windows: [{ limit: 5, period: '10s' }], onWarning })
    app.get('/', async () => ({ ok: true }))

    await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.7' } })
    await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.7' } })
    expect(onWarning).toHaveBeenCalledTimes(1)
    expect(onWarning).toHaveBeenCalledWith(expect.any(String), 'TG_UNTRUSTED_FORWARDED_FOR')
  })
})
