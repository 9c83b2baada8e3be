import { MemoryStore, type ProblemDetails } from '@tollgate/core'
import { type KoaRateLimitOptions, rateLimit } from '@tollgate/koa'
import Koa from 'koa'
import { describe, expect, it } from 'vitest'
import { runAdapterConformance } from '../src/adapter-conformance.js'
import { serveOnLoopback } from '../src/adapter-harness.js'
import { makeExpressHarness } from '../src/harness-express.js'
import { makeFastifyHarness, makeFastifyScopedHarness } from '../src/harness-fastify.js'
import { makeHonoHarness } from '../src/harness-hono.js'
import { makeKoaHarness } from '../src/harness-koa.js'
import { makeNestExpressHarness, makeNestFastifyHarness } from '../src/harness-nestjs.js'
import { ManualClock } from '../src/manual-clock.js'

runAdapterConformance('Express', makeExpressHarness)
runAdapterConformance('Fastify', makeFastifyHarness)
runAdapterConformance('Fastify (plugin options per scope)', makeFastifyScopedHarness)
runAdapterConformance('Koa', makeKoaHarness)
runAdapterConformance('NestJS (Express platform)', makeNestExpressHarness)
runAdapterConformance('NestJS (Fastify platform)', makeNestFastifyHarness)
runAdapterConformance('Hono', makeHonoHarness)

interface RateLimitError {
  status: number
  headers: Record<string, string>
  problem: ProblemDetails
}

function isRateLimitError(error: unknown): error is RateLimitError {
  return typeof error === 'object' && error !== null && 'problem' in error && 'headers' in error
}

// The conformance runs Koa as its defaults have it; with `throw: true` the fields must survive the throw.
describe('Koa rateLimit with throw: true', () => {
  async function serve(handleErrors: boolean, options: Partial<KoaRateLimitOptions> = {}) {
    const clock = new ManualClock()
    const app = new Koa()
    app.silent = true
    if (handleErrors) {
      app.use(async (ctx, next) => {
        try {
          await next()
        } catch (error) {
          if (!isRateLimitError(error)) throw error
          // As Koa's own handler does, so that only the fields the error carries reach the client.
          for (const name of ctx.res.getHeaderNames()) ctx.res.removeHeader(name)
          ctx.status = error.status
          ctx.set(error.headers)
          ctx.type = 'application/problem+json'
          ctx.body = error.problem
        }
      })
    }
    app.use(
      rateLimit({
        store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
        rule: 'api',
        windows: [{ limit: 1, period: '1m' }],
        throw: true,
        ...options,
      }),
    )
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    return serveOnLoopback(app.callback())
  }

  it("keeps the fields through Koa's own error handling", async () => {
    const harness = await serve(false)
    try {
      expect((await harness.request.get('/')).status).toBe(200)
      const refused = await harness.request.get('/')
      expect(refused.status).toBe(429)
      expect(refused.headers).toMatchObject({
        'retry-after': '60',
        'ratelimit-policy': '"api-60s";q=1;w=60',
        ratelimit: '"api-60s";r=0;t=60',
      })
      expect(refused.text).toBe('Quota exceeded for api-60s; retry in 60 s.')
    } finally {
      await harness.close()
    }
  })

  it('throws the response refusal builds: its status and headers, with its content type and body', async () => {
    const harness = await serve(false, {
      refusal: (_decision, _ctx, standard) => ({ ...standard, status: 503, headers: { 'Cache-Control': 'no-store' } }),
    })
    try {
      await harness.request.get('/')
      const refused = await harness.request.get('/')
      expect(refused.status).toBe(503)
      expect(refused.headers).toMatchObject({ 'cache-control': 'no-store', 'retry-after': '60' })
    } finally {
      await harness.close()
    }
    let thrown: unknown
    const app = new Koa()
    app.silent = true
    app.use(async (_ctx, next) => {
      try {
        await next()
      } catch (error) {
        thrown = error
        throw error
      }
    })
    const middleware = rateLimit({
      store: new MemoryStore({ sweepIntervalMs: 0 }),
      windows: [{ limit: 1, period: '1m' }],
      throw: true,
      refusal: () => ({ status: 429, contentType: 'text/html', body: '<p>Slow down.</p>' }),
    })
    app.use(middleware)
    const own = await serveOnLoopback(app.callback())
    try {
      await own.request.get('/')
      await own.request.get('/')
      expect(thrown).toMatchObject({ status: 429, contentType: 'text/html', body: '<p>Slow down.</p>' })
    } finally {
      await own.close()
      await middleware.close()
    }
  })

  it('hands an error handler the fields and the problem body to answer with', async () => {
    const harness = await serve(true)
    try {
      await harness.request.get('/')
      const refused = await harness.request.get('/')
      expect(refused.status).toBe(429)
      expect(refused.headers['retry-after']).toBe('60')
      expect(refused.headers.ratelimit).toBe('"api-60s";r=0;t=60')
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json(;|$)/)
      expect(JSON.parse(refused.text)).toMatchObject({
        status: 429,
        'violated-policies': ['api-60s'],
        'retry-after': 60,
      })
    } finally {
      await harness.close()
    }
  })
})
