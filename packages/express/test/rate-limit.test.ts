import { MemoryStore, TollgateConfigError } from '@tollgate/core'
import express5, { type ErrorRequestHandler } from 'express'
import express4 from 'express4'
import request from 'supertest'
import { afterEach, describe, expect, it } from 'vitest'
import { type ExpressRateLimitOptions, type RateLimitMiddleware, rateLimit } from '../src/index.js'

// A whole second, so header arithmetic in seconds comes out exact.
const T = 1_700_000_000_000

const opened: RateLimitMiddleware[] = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((middleware) => middleware.close()))
})

function limitOf(options: Partial<ExpressRateLimitOptions> = {}): RateLimitMiddleware {
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

const reportError: ErrorRequestHandler = (error, _req, res, _next) => {
  res.status(500).json({ handledBy: 'error handler', message: (error as Error).message })
}

describe.each([
  ['Express 5', express5],
  ['Express 4', express4],
])('rateLimit for %s', (_name, express) => {
  it('allows exactly the limit, then answers 429 with problem+json and draft-10 headers', async () => {
    const app = express()
    app.use(limitOf())
    app.get('/', (_req, res) => {
      res.send('ok')
    })

    const first = await request(app).get('/').expect(200, 'ok')
    expect(first.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
    expect(first.headers.ratelimit).toBe('"2-in-10s";r=1;t=10')
    const second = await request(app).get('/').expect(200, 'ok')
    expect(second.headers.ratelimit).toBe('"2-in-10s";r=0;t=10')

    const refused = await request(app).get('/').expect(429)
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json(;|$)/)
    expect(refused.headers['ratelimit-policy']).toBe('"2-in-10s";q=2;w=10')
    expect(refused.headers.ratelimit).toBe('"2-in-10s";r=0;t=10')
    expect(refused.headers['retry-after']).toBe('10')
    const problem = JSON.parse(refused.text)
    expect(problem).toMatchObject({
      status: 429,
      'violated-policies': ['2-in-10s'],
      'retry-after': 10,
    })
  })

  it('hands a request decided in the process on in the same turn; one with an async identify once it settles', async () => {
    for (const [identify, sameTurn] of [
      [undefined, true],
      [async () => 'user:1', false],
    ] as const) {
      const app = express()
      // A turn of the microtask queue between this middleware and the handler sets `ended`.
      app.use((_req, res, next) => {
        const turn = { ended: false }
        res.locals.turn = turn
        queueMicrotask(() => {
          turn.ended = true
        })
        next()
      })
      app.use(limitOf(identify ? { identify } : {}))
      app.get('/', (_req, res) => {
        res.json({ sameTurn: !res.locals.turn.ended, remaining: res.locals.rateLimit?.windows[0]?.remaining })
      })
      await request(app).get('/').expect(200, { sameTurn, remaining: 1 })
    }
  })

  it('limits only the route it is given to', async () => {
    const app = express()
    app.post('/login', limitOf({ windows: [{ limit: 1, period: '10s' }] }), (_req, res) => {
      res.send('logged in')
    })
    app.post('/other', (_req, res) => {
      res.send('other')
    })

    await request(app).post('/login').expect(200, 'logged in')
    await request(app).post('/login').expect(429)
    const other = await request(app).post('/other').expect(200, 'other')
    expect(other.headers.ratelimit).toBeUndefined()
  })

  it('puts the decision on res.locals.rateLimit for the handler', async () => {
    const app = express()
    app.use(limitOf())
    app.get('/', (_req, res) => {
      res.json(res.locals.rateLimit)
    })

    const { body } = await request(app).get('/').expect(200)
    expect(body).toMatchObject({ allowed: true, reason: 'ok', rule: 'inline:sliding-log:2/10s', cost: 1, nowMs: T })
  })

  it('hands a throwing identify to the app error handler (500), not to an unhandled rejection', async () => {
    const app = express()
    app.use(
      limitOf({
        identify: () => {
          throw new Error('no user store')
        },
      }),
    )
    app.get('/', (_req, res) => {
      res.send('not reached')
    })
    app.use(reportError)

    const { body } = await request(app).get('/').expect(500)
    expect(body).toEqual({ handledBy: 'error handler', message: 'no user store' })
  })

  it('reads the trust proxy setting for the client address', async () => {
    const app = express()
    app.set('trust proxy', 'loopback')
    app.use(limitOf({ windows: [{ limit: 1, period: '10s' }] }))
    app.get('/', (_req, res) => {
      res.send('ok')
    })

    await request(app).get('/').set('X-Forwarded-For', '203.0.113.7').expect(200)
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.7').expect(429)
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.8').expect(200)
  })

  it('throws TollgateConfigError at construction for a bad option', () => {
    expect(() => rateLimit({ windows: [{ limit: 2, period: '10s' }], dryRun: 'yes' as never })).toThrow(
      TollgateConfigError,
    )
  })
})
