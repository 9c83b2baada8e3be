import Router from '@koa/router'
import { MemoryStore, TollgateConfigError } from '@tollgate/core'
import Koa3, { type Middleware } from 'koa'
import Koa2 from 'koa2'
import request from 'supertest'
import { afterEach, describe, expect, it } from 'vitest'
import { type KoaRateLimitOptions, type RateLimitMiddleware, rateLimit } from '../src/index.js'

// A whole second, so header arithmetic in seconds comes out exact.
const T = 1_700_000_000_000

const opened: RateLimitMiddleware[] = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((middleware) => middleware.close()))
})

function limitOf(options: Partial<KoaRateLimitOptions> = {}): RateLimitMiddleware {
  const middleware = rateLimit({
    store: new MemoryStore({ clock: () => T }),
    windows: [{ limit: 2, period: '10s' }],
    ...options,
  })
  opened.push(middleware)
  return middleware
}

describe('rateLimit middleware', () => {
  it('carries its engine as engine, and as limit, the deprecated name', () => {
    const middleware = limitOf()
    expect(middleware.engine.rule).toBe('inline:sliding-log:2/10s')
    expect(middleware.limit).toBe(middleware.engine)
  })
})

const ok: Middleware = (ctx) => {
  ctx.body = 'ok'
}

describe.each([
  ['Koa 3', Koa3],
  ['Koa 2', Koa2],
])('rateLimit for %s', (_name, Koa) => {
  function appWith(...middleware: Middleware[]): Koa3 {
    const app = new Koa()
    // Koa logs every error it handles; these tests cause some on purpose.
    app.silent = true
    for (const m of middleware) app.use(m)
    return app
  }

  it('allows exactly the limit, then with throw: true throws a 429 that keeps the draft-10 headers through the default error handler', async () => {
    const server = appWith(limitOf({ throw: true }), ok).callback()

    const first = await request(server).get('/').expect(200, 'ok')
    expect(first.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
    expect(first.headers.ratelimit).toBe('"2-in-10s";r=1;t=10')
    const second = await request(server).get('/').expect(200, 'ok')
    expect(second.headers.ratelimit).toBe('"2-in-10s";r=0;t=10')

    const refused = await request(server).get('/').expect(429)
    // Koa's own error handler answers in plain text with the error's exposed message.
    expect(refused.headers['content-type']).toMatch(/^text\/plain/)
    expect(refused.text).toBe('Quota exceeded for 2-in-10s; retry in 10 s.')
    expect(refused.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
    expect(refused.headers.ratelimit).toBe('"2-in-10s";r=0;t=10')
    expect(refused.headers['retry-after']).toBe('10')
  })

  it('with throw: true, keeps the headers when a custom error middleware turns the 429 into its own response', async () => {
    let caught: unknown
    const handleErrors: Middleware = async (ctx, next) => {
      try {
        await next()
      } catch (error) {
        caught = error
        ctx.status = (error as { status: number }).status
        ctx.body = { custom: true }
      }
    }
    const server = appWith(
      handleErrors,
      limitOf({ windows: [{ limit: 1, period: '10s' }], throw: true }),
      ok,
    ).callback()

    await request(server).get('/').expect(200)
    const refused = await request(server).get('/').expect(429, { custom: true })
    expect(refused.headers['ratelimit-policy']).toBe('"1-in-10s";q=1;w=10')
    expect(refused.headers.ratelimit).toBe('"1-in-10s";r=0;t=10')
    expect(refused.headers['retry-after']).toBe('10')
    expect(caught).toMatchObject({
      status: 429,
      expose: true,
      headers: { 'Retry-After': '10' },
      problem: { status: 429, 'violated-policies': ['1-in-10s'] },
      decision: { allowed: false, reason: 'limited' },
    })
  })

  // Regression: refusals were thrown by default, so an app with the usual Koa error middleware
  // answered them with its own JSON, not the problem+json 429 Express and Fastify answer.
  it('responds with the problem+json body itself by default, whatever error middleware the app has', async () => {
    const handleErrors: Middleware = async (ctx, next) => {
      try {
        await next()
      } catch (error) {
        ctx.status = (error as { status?: number }).status ?? 500
        ctx.body = { error: (error as Error).message }
      }
    }
    const server = appWith(handleErrors, limitOf({ windows: [{ limit: 1, period: '10s' }] }), ok).callback()

    await request(server).get('/').expect(200)
    const refused = await request(server).get('/').expect(429)
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json(;|$)/)
    expect(refused.headers['ratelimit-policy']).toBe('"1-in-10s";q=1;w=10')
    expect(refused.headers.ratelimit).toBe('"1-in-10s";r=0;t=10')
    expect(refused.headers['retry-after']).toBe('10')
    expect(JSON.parse(refused.text)).toMatchObject({
      status: 429,
      'violated-policies': ['1-in-10s'],
      'retry-after': 10,
    })
  })

  // Regression: on Koa only, a later middleware's error lost the rate limit headers, which Koa's
  // default error handler clears.
  it.each([false, true])(
    "keeps the headers on a later middleware's error through Koa's default error handler (throw: %s)",
    async (throwError) => {
      const failing: Middleware = () => {
        throw Object.assign(new Error('upstream down'), { status: 502, expose: true, headers: { 'X-Upstream': 'a' } })
      }
      const server = appWith(limitOf({ throw: throwError }), failing).callback()

      const response = await request(server).get('/').expect(502, 'upstream down')
      expect(response.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
      expect(response.headers.ratelimit).toBe('"2-in-10s";r=1;t=10')
      expect(response.headers['x-upstream']).toBe('a')
    },
  )

  it('hands a request decided in the process on in the same turn; one with an async identify once it settles', async () => {
    for (const [identify, sameTurn] of [
      [undefined, true],
      [async () => 'user:1', false],
    ] as const) {
      // A turn of the microtask queue between the first middleware and the handler sets `ended`.
      const turn = { ended: false }
      const app = appWith(
        (_ctx, next) => {
          queueMicrotask(() => {
            turn.ended = true
          })
          return next()
        },
        limitOf(identify ? { identify } : {}),
        (ctx) => {
          ctx.body = { sameTurn: !turn.ended, remaining: ctx.state.rateLimit?.windows[0]?.remaining }
        },
      )
      await request(app.callback()).get('/').expect(200, { sameTurn, remaining: 1 })
    }
  })

  it('puts the decision on ctx.state.rateLimit for the handler', async () => {
    const server = appWith(limitOf(), (ctx) => {
      ctx.body = ctx.state.rateLimit
    }).callback()

    const { body } = await request(server).get('/').expect(200)
    expect(body).toMatchObject({ allowed: true, reason: 'ok', rule: 'inline:sliding-log:2/10s', cost: 1, nowMs: T })
  })

  it('limits only the @koa/router route it is given to', async () => {
    const router = new Router()
    router.post('/login', limitOf({ windows: [{ limit: 1, period: '10s' }] }), (ctx) => {
      ctx.body = 'logged in'
    })
    router.post('/other', ok)
    const app = appWith()
    app.use(router.routes())
    const server = app.callback()

    await request(server).post('/login').expect(200, 'logged in')
    await request(server).post('/login').expect(429)
    const other = await request(server).post('/other').expect(200, 'ok')
    expect(other.headers.ratelimit).toBeUndefined()
  })

  it('hands a throwing identify to the error handler (500), not to an unhandled rejection', async () => {
    const errors: unknown[] = []
    const app = appWith(
      limitOf({
        identify: () => {
          throw new Error('no user store')
        },
      }),
      ok,
    )
    app.on('error', (error) => errors.push(error))

    await request(app.callback()).get('/').expect(500, 'Internal Server Error')
    expect(errors).toMatchObject([{ message: 'no user store', status: 500 }])
  })

  it('reads app.proxy for the client address', async () => {
    const app = appWith(limitOf({ windows: [{ limit: 1, period: '10s' }] }), ok)
    app.proxy = true
    const server = app.callback()

    await request(server).get('/').set('X-Forwarded-For', '203.0.113.7').expect(200)
    await request(server).get('/').set('X-Forwarded-For', '203.0.113.7').expect(429)
    await request(server).get('/').set('X-Forwarded-For', '203.0.113.8').expect(200)
  })
})

describe('option throw', () => {
  it('must be a boolean, checked at construction', () => {
    expect(() => rateLimit({ windows: [{ limit: 2, period: '10s' }], throw: 'yes' as never })).toThrow(
      new TollgateConfigError("option throw must be a boolean, got 'yes'"),
    )
  })

  it('is not passed on to core, which still rejects keys it does not know', () => {
    expect(() => limitOf({ throw: false })).not.toThrow()
    expect(() => rateLimit({ windows: [{ limit: 2, period: '10s' }], thorw: false } as never)).toThrow(
      TollgateConfigError,
    )
  })

  // Regression: the list of known options in that error left throw out.
  it('is listed among the known options when an option is unknown', () => {
    expect(() => rateLimit({ windows: [{ limit: 2, period: '10s' }], thorw: false } as never)).toThrow(/'throw'/)
  })
})
