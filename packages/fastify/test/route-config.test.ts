import { TollgateConfigError } from '@tollgate/core'
import type { FastifyRequest, RouteOptions } from 'fastify'
import { describe, expect, it } from 'vitest'
import { appWith } from './app.js'

const ok = async () => ({ ok: true })

describe('a route with its own config.rateLimit', () => {
  it('applies only its own limit, leaving the plugin-wide state untouched', async () => {
    const app = await appWith({ windows: [{ limit: 2, period: '10s' }] })
    app.post('/login', { config: { rateLimit: { windows: [{ limit: 1, period: '1m' }], rule: 'strict' } } }, ok)
    app.get('/', ok)

    const first = await app.inject({ method: 'POST', url: '/login' })
    expect(first.statusCode).toBe(200)
    expect(first.headers['ratelimit-policy']).toBe('"strict-60s";q=1;w=60')
    expect(first.headers.ratelimit).toBe('"strict-60s";r=0;t=60')
    const refused = await app.inject({ method: 'POST', url: '/login' })
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('60')
    expect(refused.json()['violated-policies']).toEqual(['strict-60s'])

    expect((await app.inject('/')).headers.ratelimit).toBe('"2-in-10s";r=1;t=10')
  })

  it('with false, gets no headers and is never refused', async () => {
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }] })
    app.get('/health', { config: { rateLimit: false } }, ok)

    for (let i = 0; i < 3; i++) {
      const response = await app.inject('/health')
      expect(response.statusCode).toBe(200)
      expect(response.headers.ratelimit).toBeUndefined()
      expect(response.headers['ratelimit-policy']).toBeUndefined()
    }
  })

  it("choosing a rule per request with a function, decides with the plugin's limiter and rules", async () => {
    const app = await appWith({
      rules: {
        'api.free': { windows: [{ limit: 1, period: '1m' }] },
        'api.pro': { windows: [{ limit: 3, period: '1m' }] },
      },
      rule: 'api.free',
    })
    const byPlan = (request: FastifyRequest) => (request.headers['x-plan'] === 'pro' ? 'api.pro' : 'api.free')
    app.get('/reports', { config: { rateLimit: { rule: byPlan } } }, ok)
    app.get('/', ok)

    const pro = await app.inject({ url: '/reports', headers: { 'x-plan': 'pro' } })
    expect(pro.headers['ratelimit-policy']).toBe('"api.pro-60s";q=3;w=60')
    expect(pro.headers.ratelimit).toBe('"api.pro-60s";r=2;t=60')
    // The same counts as the plugin-wide limit's: the free plan's one request went to /.
    expect((await app.inject('/')).statusCode).toBe(200)
    const free = await app.inject('/reports')
    expect(free.statusCode).toBe(429)
    expect(free.json()['violated-policies']).toEqual(['api.free-60s'])
  })

  it('naming another rule of the plugin-wide rules, decides with the shared limiter', async () => {
    const writes = { rule: 'api.write' }
    const app = await appWith({
      rules: {
        'api.read': { windows: [{ limit: 100, period: '1m' }] },
        'api.write': { windows: [{ limit: 3, period: '1m' }] },
      },
      rule: 'api.read',
    })
    app.post('/items', { config: { rateLimit: writes } }, ok)
    app.get('/writes-left', async (request) => {
      const verdict = await app.tollgate.check(request, writes)
      return { remaining: verdict.decision?.windows[0]?.remaining }
    })

    expect((await app.inject({ method: 'POST', url: '/items' })).headers.ratelimit).toBe('"api.write-60s";r=2;t=60')
    expect((await app.inject({ method: 'POST', url: '/items' })).headers.ratelimit).toBe('"api.write-60s";r=1;t=60')
    const left = await app.inject('/writes-left')
    expect(left.json()).toEqual({ remaining: 0 })
    expect(left.headers.ratelimit).toBe('"api.read-60s";r=99;t=60')
    expect((await app.inject({ method: 'POST', url: '/items' })).statusCode).toBe(429)
  })

  it('without a rule, names its windows after the route', async () => {
    const app = await appWith({ windows: [{ limit: 100, period: '10s' }] })
    app.post('/upload', { config: { rateLimit: { windows: [{ limit: 2, period: '1m' }] } } }, ok)

    const response = await app.inject({ method: 'POST', url: '/upload' })
    expect(response.headers['ratelimit-policy']).toBe('"POST /upload-60s";q=2;w=60')
  })

  it('limits HEAD requests to a GET route with the GET route’s limit', async () => {
    const app = await appWith({ windows: [{ limit: 100, period: '10s' }] })
    app.get('/report', { config: { rateLimit: { windows: [{ limit: 2, period: '1m' }] } } }, ok)

    expect((await app.inject({ method: 'HEAD', url: '/report' })).headers.ratelimit).toBe('"GET /report-60s";r=1;t=60')
    expect((await app.inject({ method: 'GET', url: '/report' })).headers.ratelimit).toBe('"GET /report-60s";r=0;t=60')
    expect((await app.inject({ method: 'HEAD', url: '/report' })).statusCode).toBe(429)
  })

  it('keeps hooks the route already has, running them first', async () => {
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }] })
    const ran: string[] = []
    app.get('/', { onRequest: async () => void ran.push('route hook') }, ok)

    await app.inject('/')
    const refused = await app.inject('/')
    expect(refused.statusCode).toBe(429)
    expect(ran).toEqual(['route hook', 'route hook'])
  })

  it('is charged once even when its hook ends up on the route twice', async () => {
    const app = await appWith({ windows: [{ limit: 5, period: '10s' }] })
    app.addHook('onRoute', (routeOptions: RouteOptions) => {
      const hooks = [routeOptions.onRequest ?? []].flat()
      routeOptions.onRequest = [...hooks, ...hooks]
    })
    app.get('/', ok)

    expect((await app.inject('/')).headers.ratelimit).toBe('"5-in-10s";r=4;t=10')
    expect((await app.inject('/')).headers.ratelimit).toBe('"5-in-10s";r=3;t=10')
  })

  it('throws at route registration, naming the route, when its options are invalid', async () => {
    const app = await appWith({ windows: [{ limit: 5, period: '10s' }] })

    expect(() => app.get('/a', { config: { rateLimit: { rule: 'nope' } } }, ok)).toThrow(
      new TollgateConfigError(
        `route GET /a: option rule "nope" is not one of the limiter's rules: inline:sliding-log:5/10s`,
      ),
    )
    expect(() => app.get('/b', { config: { rateLimit: { windows: [{ limit: 0, period: '1s' }] } } }, ok)).toThrow(
      new TollgateConfigError("route GET /b: rule 'GET /b', window 0: limit must be a positive integer, got 0"),
    )
    // @ts-expect-error an invalid hook, as plain JavaScript could pass it
    expect(() => app.get('/c', { config: { rateLimit: { hook: 'onSend' } } }, ok)).toThrow(
      new TollgateConfigError(`route GET /c: route option hook must be 'onRequest' or 'preHandler', got 'onSend'`),
    )
    // Fastify infers the route's config type from the object given, so this type-checks too.
    expect(() => app.get('/d', { config: { rateLimit: true } }, ok)).toThrow(
      new TollgateConfigError('route GET /d: route rate limit options must be an object, got true'),
    )
  })
})

describe('with global: false', () => {
  it('leaves routes without config alone and still limits routes with their own', async () => {
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], global: false })
    app.get('/open', ok)
    app.get('/limited', { config: { rateLimit: {} } }, ok)

    for (let i = 0; i < 3; i++) {
      const open = await app.inject('/open')
      expect(open.statusCode).toBe(200)
      expect(open.headers.ratelimit).toBeUndefined()
    }
    expect((await app.inject('/limited')).headers.ratelimit).toBe('"1-in-10s";r=0;t=10')
    expect((await app.inject('/limited')).statusCode).toBe(429)
  })

  // Regression: the plugin built a plugin-wide engine even when no route used it, so it
  // demanded a rule of its own that nothing would ever apply.
  it('needs no rule of its own: each limited route brings its windows, on the plugin store', async () => {
    const app = await appWith({ global: false, identify: () => 'user:1' })
    expect(app.tollgate.engine).toBeUndefined()
    expect(app.tollgate.limit).toBeUndefined()
    app.post('/upload', { config: { rateLimit: { windows: [{ limit: 1, period: '1m' }] } } }, ok)
    app.post('/login', { config: { rateLimit: { windows: [{ limit: 2, period: '1m' }] } } }, ok)
    app.get('/open', ok)

    const upload = await app.inject({ method: 'POST', url: '/upload' })
    expect(upload.headers.ratelimit).toBe('"POST /upload-60s";r=0;t=60')
    expect((await app.inject({ method: 'POST', url: '/upload' })).statusCode).toBe(429)
    // Another route's windows are named after it, so their keys never meet.
    expect((await app.inject({ method: 'POST', url: '/login' })).headers.ratelimit).toBe('"POST /login-60s";r=1;t=60')
    expect((await app.inject('/open')).headers.ratelimit).toBeUndefined()
  })
})
