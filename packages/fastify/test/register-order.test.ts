import Fastify from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { type RouteRateLimitOptions, tollgate } from '../src/index.js'
import { fixedClockStore } from './app.js'

function app() {
  const made = Fastify()
  onTestFinished(() => made.close())
  return made
}

const ok = async () => ({ ok: true })

describe('routes added before the plugin loaded', () => {
  // Regression: with `app.register(tollgate, …)` not awaited (CommonJS has no top-level await),
  // routes added in the same tick were added before the plugin loaded, never reached its onRoute
  // hook, and answered 200 without headers; a warning came only with their first request.
  it('are limited, with the headers, when the register is not awaited', async () => {
    const warnings: string[] = []
    const fastify = app()
    fastify.register(tollgate, {
      store: fixedClockStore(),
      windows: [{ limit: 2, period: '10s' }],
      onWarning: (message) => warnings.push(message),
    })
    fastify.get('/early', ok)
    fastify.get('/health', { config: { rateLimit: false } }, ok)
    await fastify.after()
    fastify.get('/late', ok)

    const early = await fastify.inject('/early')
    expect(early.statusCode).toBe(200)
    expect(early.headers.ratelimit).toBe('"2-in-10s";r=1;t=10')
    expect((await fastify.inject('/early')).statusCode).toBe(200)
    const refused = await fastify.inject('/early')
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['content-type']).toBe('application/problem+json; charset=utf-8')

    const health = await fastify.inject('/health')
    expect(health.statusCode).toBe(200)
    expect(health.headers.ratelimit).toBeUndefined()
    // The plugin-wide limit, one count for every route it covers, early or late.
    expect((await fastify.inject('/late')).statusCode).toBe(429)
    expect(warnings).toEqual([])
    // Hooks gathered at ready: the early routes' come from the app.
    expect(fastify.printRoutes({ includeHooks: true, commonPrefix: false })).toContain('limitEarlyRoute')
  })

  it("charge a GET route and its HEAD route to one limit, once a request, at the route's own hook", async () => {
    const fastify = app()
    fastify.register(tollgate, { store: fixedClockStore(), windows: [{ limit: 3, period: '10s' }] })
    fastify.get('/item', ok)
    const perRoute: RouteRateLimitOptions = { windows: [{ limit: 2, period: '10s' }], hook: 'preHandler' }
    fastify.post('/login', { config: { rateLimit: perRoute } }, ok)

    const item = [
      await fastify.inject('/item'),
      await fastify.inject({ method: 'HEAD', url: '/item' }),
      await fastify.inject('/item'),
      await fastify.inject({ method: 'HEAD', url: '/item' }),
    ]
    expect(item.map((response) => response.statusCode)).toEqual([200, 200, 200, 429])

    // Checked at preHandler only: two requests fit a limit of two.
    const logins = []
    for (let i = 0; i < 3; i++) logins.push((await fastify.inject({ method: 'POST', url: '/login' })).statusCode)
    expect(logins).toEqual([200, 200, 429])
    expect((await fastify.inject({ method: 'POST', url: '/login' })).headers.ratelimit).toBe(
      '"POST /login-10s";r=0;t=10',
    )
  })

  it('with global: false, limit only the routes that ask for a limit', async () => {
    const fastify = app()
    fastify.register(tollgate, { store: fixedClockStore(), global: false })
    fastify.get('/open', ok)
    fastify.post('/login', { config: { rateLimit: { windows: [{ limit: 1, period: '10s' }] } } }, ok)

    const open = await fastify.inject('/open')
    expect(open.statusCode).toBe(200)
    expect(open.headers.ratelimit).toBeUndefined()
    expect((await fastify.inject({ method: 'POST', url: '/login' })).statusCode).toBe(200)
    expect((await fastify.inject({ method: 'POST', url: '/login' })).statusCode).toBe(429)
  })

  it('fail the requests of a route whose config is wrong, naming the route, through the error handler', async () => {
    const fastify = app()
    const errors: string[] = []
    fastify.setErrorHandler((error: Error, _request, reply) => {
      errors.push(error.message)
      return reply.code(500).send({ error: error.message })
    })
    fastify.register(tollgate, { store: fixedClockStore(), windows: [{ limit: 2, period: '10s' }] })
    fastify.get('/bad', { config: { rateLimit: { hook: 'onSend' as 'onRequest' } } }, ok)

    expect((await fastify.inject('/bad')).statusCode).toBe(500)
    expect(errors).toEqual([`route GET /bad: route option hook must be 'onRequest' or 'preHandler', got 'onSend'`])
  })

  it('leave nothing to an app-wide hook when the register is awaited', async () => {
    const fastify = app()
    await fastify.register(tollgate, { store: fixedClockStore(), windows: [{ limit: 1, period: '10s' }] })
    fastify.get('/', ok)
    expect((await fastify.inject('/')).statusCode).toBe(200)
    expect((await fastify.inject('/')).statusCode).toBe(429)
    expect(fastify.printRoutes({ includeHooks: true, commonPrefix: false })).not.toContain('limitEarlyRoute')
  })

  it('in another scope, registered earlier, are none of its business', async () => {
    const fastify = app()
    await fastify.register(async (scope) => {
      scope.get('/elsewhere', ok)
    })
    await fastify.register(
      async (scope) => {
        await scope.register(tollgate, { store: fixedClockStore(), windows: [{ limit: 1, period: '10s' }] })
        scope.get('/limited', ok)
      },
      { prefix: '/v1' },
    )
    await fastify.inject('/elsewhere')
    const elsewhere = await fastify.inject('/elsewhere')
    expect(elsewhere.statusCode).toBe(200)
    expect(elsewhere.headers.ratelimit).toBeUndefined()
    await fastify.inject('/v1/limited')
    expect((await fastify.inject('/v1/limited')).statusCode).toBe(429)
  })
})
