import { createLimiter, MemoryStore, type Store } from '@tollgate/core'
import Fastify from 'fastify'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { type RouteRateLimitOptions, tollgate } from '../src/index.js'
import { appWith, fixedClockStore, NOW } from './app.js'

describe('what the plugin adds to Fastify', () => {
  it('request.rateLimit holds the decision in the handler', async () => {
    const app = await appWith({ windows: [{ limit: 2, period: '10s' }] })
    app.get('/', async (request) => request.rateLimit)

    expect((await app.inject('/')).json()).toEqual({
      allowed: true,
      reason: 'ok',
      rule: 'inline:sliding-log:2/10s',
      cost: 1,
      retryAfterMs: 0,
      nowMs: NOW,
      windows: [
        {
          rule: 'inline:sliding-log:2/10s',
          identifier: 'ip:127.0.0.1',
          limit: 2,
          periodMs: 10_000,
          remaining: 1,
          resetAtMs: NOW + 10_000,
          failed: false,
        },
      ],
    })
  })

  it('fastify.tollgate.check decides by hand inside a handler', async () => {
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], global: false })
    app.get('/', async (request, reply) => {
      const verdict = await app.tollgate.check(request)
      reply.headers(verdict.headers)
      if (verdict.action === 'respond') return reply.code(verdict.status).type(verdict.contentType).send(verdict.body)
      return { ok: true }
    })

    const first = await app.inject('/')
    expect(first.json()).toEqual({ ok: true })
    expect(first.headers.ratelimit).toBe('"1-in-10s";r=0;t=10')
    expect((await app.inject('/')).statusCode).toBe(429)
    expect(app.tollgate.engine?.rule).toBe('inline:sliding-log:1/10s')
    expect(app.tollgate.limit).toBe(app.tollgate.engine)
  })

  it('fastify.tollgate.check with route options makes that engine once per options object', async () => {
    const burst: RouteRateLimitOptions = { windows: [{ limit: 2, period: '1s' }], rule: 'burst' }
    const app = await appWith({ windows: [{ limit: 100, period: '10s' }], global: false })
    app.get('/', async (request) => {
      const verdict = await app.tollgate.check(request, burst)
      return { action: verdict.action, remaining: verdict.decision?.windows[0]?.remaining }
    })

    expect((await app.inject('/')).json()).toEqual({ action: 'continue', remaining: 1 })
    expect((await app.inject('/')).json()).toEqual({ action: 'continue', remaining: 0 })
    expect((await app.inject('/')).json()).toEqual({ action: 'respond', remaining: 0 })
  })

  it('fastify.tollgate.check given the reply lets countOnly give a charge back after the response', async () => {
    const limiter = createLimiter({
      store: fixedClockStore(),
      rules: { login: { windows: [{ limit: 1, period: '10s' }] } },
    })
    onTestFinished(() => limiter.close())
    const failures = { limiter, rule: 'login', countOnly: 'failures' as const }
    const app = await appWith({ windows: [{ limit: 100, period: '10s' }], global: false })
    app.post('/login', async (request, reply) => {
      const verdict = await app.tollgate.check(request, failures, reply)
      if (verdict.action === 'respond') return reply.code(verdict.status).type(verdict.contentType).send(verdict.body)
      return reply.code(request.headers['x-password'] === 'right' ? 200 : 401).send()
    })
    const login = (password: string) =>
      app.inject({ method: 'POST', url: '/login', headers: { 'x-password': password } })
    const left = async () => (await limiter.peek('login', 'ip:127.0.0.1', { cost: 0 })).windows[0]?.remaining
    /** The charge is given back after the response has finished: a few turns of the event loop. */
    async function leftOnceSettled(): Promise<number | undefined> {
      for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve))
      return left()
    }

    expect((await login('right')).statusCode).toBe(200)
    expect(await leftOnceSettled()).toBe(1)
    expect((await login('wrong')).statusCode).toBe(401)
    expect(await leftOnceSettled()).toBe(0)
    expect((await login('right')).statusCode).toBe(429)
  })

  it("registers with fastify-plugin's name, so other plugins can depend on it", async () => {
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }] })
    await app.ready()
    expect(app.hasPlugin('@tollgate/fastify')).toBe(true)
  })

  it('closing the app closes the limiters the plugin made, not a limiter passed in', async () => {
    const store = fixedClockStore()
    const routeStore = fixedClockStore()
    const closeStore = vi.spyOn(store, 'close')
    const closeRouteStore = vi.spyOn(routeStore, 'close')
    const app = Fastify()
    await app.register(tollgate, { store, windows: [{ limit: 1, period: '10s' }] })
    app.get('/shared', { config: { rateLimit: { windows: [{ limit: 1, period: '1m' }] } } }, async () => 1)
    app.get(
      '/own',
      { config: { rateLimit: { store: routeStore, windows: [{ limit: 1, period: '1m' }] } } },
      async () => 1,
    )
    await app.close()
    // A route's limiter on the plugin's store leaves that store to the plugin-wide limiter.
    expect(closeStore).toHaveBeenCalledTimes(1)
    expect(closeRouteStore).toHaveBeenCalledTimes(1)

    const yours: Store = new MemoryStore({ sweepIntervalMs: 0 })
    const closeYours = vi.spyOn(yours, 'close')
    const limiter = createLimiter({ store: yours, rules: { api: { windows: [{ limit: 1, period: '1s' }] } } })
    const other = Fastify()
    await other.register(tollgate, { limiter, rule: 'api' })
    await other.close()
    expect(closeYours).not.toHaveBeenCalled()
    await limiter.close()
  })
})
