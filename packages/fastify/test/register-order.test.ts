import Fastify from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { tollgate } from '../src/index.js'
import { fixedClockStore } from './app.js'

function app() {
  const made = Fastify()
  onTestFinished(() => made.close())
  return made
}

describe('routes added before the plugin loaded', () => {
  // Regression: with `app.register(tollgate, …)` not awaited, routes added in the same tick were
  // added before the plugin loaded, never reached its onRoute hook, and went unlimited silently.
  it('are named in a TG_ROUTE_NOT_LIMITED warning on their first request, once each', async () => {
    const warnings: Array<{ message: string; code: string }> = []
    const fastify = app()
    fastify.register(tollgate, {
      store: fixedClockStore(),
      windows: [{ limit: 1, period: '10s' }],
      onWarning: (message, code) => warnings.push({ message, code }),
    })
    fastify.get('/early', async () => ({ ok: true }))
    fastify.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))
    await fastify.after()
    fastify.get('/late', async () => ({ ok: true }))

    // What the warning is about: the early route has no limit on Fastify 5.
    expect((await fastify.inject('/early')).statusCode).toBe(200)
    expect((await fastify.inject('/early')).statusCode).toBe(200)
    expect((await fastify.inject('/health')).statusCode).toBe(200)
    expect((await fastify.inject('/late')).statusCode).toBe(200)
    expect((await fastify.inject('/late')).statusCode).toBe(429)

    expect(warnings).toEqual([
      {
        message:
          'route GET /early was added before @tollgate/fastify loaded, so it is not limited: await app.register(tollgate, …) before adding routes',
        code: 'TG_ROUTE_NOT_LIMITED',
      },
    ])
  })

  it('with global: false, only routes that ask for a limit are named', async () => {
    const warnings: string[] = []
    const fastify = app()
    fastify.register(tollgate, {
      store: fixedClockStore(),
      global: false,
      onWarning: (message) => warnings.push(message),
    })
    fastify.get('/open', async () => ({ ok: true }))
    fastify.post('/login', { config: { rateLimit: { windows: [{ limit: 1, period: '10s' }] } } }, async () => ({}))

    await fastify.inject('/open')
    await fastify.inject({ method: 'POST', url: '/login' })
    expect(warnings).toEqual([expect.stringMatching(/^route POST \/login was added before @tollgate\/fastify loaded/)])
  })

  it('leave nothing to warn about when the register is awaited', async () => {
    const warnings: string[] = []
    const fastify = app()
    await fastify.register(tollgate, {
      store: fixedClockStore(),
      windows: [{ limit: 1, period: '10s' }],
      onWarning: (message) => warnings.push(message),
    })
    fastify.get('/', async () => ({ ok: true }))
    expect((await fastify.inject('/')).statusCode).toBe(200)
    expect((await fastify.inject('/')).statusCode).toBe(429)
    expect(warnings).toEqual([])
  })

  it('in another scope, registered earlier, are none of its business', async () => {
    const warnings: string[] = []
    const fastify = app()
    await fastify.register(async (scope) => {
      scope.get('/elsewhere', async () => ({ ok: true }))
    })
    await fastify.register(
      async (scope) => {
        await scope.register(tollgate, {
          store: fixedClockStore(),
          windows: [{ limit: 1, period: '10s' }],
          onWarning: (message) => warnings.push(message),
        })
        scope.get('/limited', async () => ({ ok: true }))
      },
      { prefix: '/v1' },
    )
    await fastify.inject('/elsewhere')
    await fastify.inject('/v1/limited')
    expect((await fastify.inject('/v1/limited')).statusCode).toBe(429)
    expect(warnings).toEqual([])
  })
})
