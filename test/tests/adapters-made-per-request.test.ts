import { getRequestListener } from '@hono/node-server'
import type { WindowOptions } from '@tollgate/core'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import Koa from 'koa'
import supertest from 'supertest'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { type Harness, serveOnLoopback } from '../src/adapter-harness.js'

const WINDOWS: WindowOptions[] = [{ limit: 100, period: '1m' }]

let harness: Harness | undefined
afterEach(async () => {
  await harness?.close()
  harness = undefined
})

/** The codes of the warnings given to `onWarning`. */
function warningSink() {
  const codes: string[] = []
  return { codes, onWarning: (_message: string, code: string) => codes.push(code) }
}

/** Each app in a process of its own, as far as the adapters know: the process warns once. */
async function fresh<T>(adapter: () => Promise<T>): Promise<T> {
  vi.resetModules()
  return adapter()
}

/** Three requests, each its own connection, as three clients send them. */
async function threeRequests(served: Harness): Promise<number[]> {
  harness = served
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) statuses.push((await served.request.get('/')).status)
  return statuses
}

/**
 * Apps that make their rate limit middleware in the request handler, the mistake
 * express-rate-limit's `validate.creationStack` catches on Express alone, against apps that make
 * it once: only the first warn, once, whatever the framework.
 */
describe('a rate limit middleware made for each request', () => {
  it('Express: warns once, TG_LIMITER_PER_REQUEST', async () => {
    const { rateLimit } = await fresh(() => import('@tollgate/express'))
    const { codes, onWarning } = warningSink()
    const app = express()
    app.get(
      '/',
      (req, res, next) => rateLimit({ windows: WINDOWS, onWarning })(req, res, next),
      (_req, res) => {
        res.send('ok')
      },
    )
    expect(await threeRequests(await serveOnLoopback(app))).toEqual([200, 200, 200])
    expect(codes).toEqual(['TG_LIMITER_PER_REQUEST'])
  })

  it('Koa: warns once, TG_LIMITER_PER_REQUEST', async () => {
    const { rateLimit } = await fresh(() => import('@tollgate/koa'))
    const { codes, onWarning } = warningSink()
    const app = new Koa()
    app.use((ctx, next) => rateLimit({ windows: WINDOWS, onWarning })(ctx, next))
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    expect(await threeRequests(await serveOnLoopback(app.callback()))).toEqual([200, 200, 200])
    expect(codes).toEqual(['TG_LIMITER_PER_REQUEST'])
  })

  it('Fastify: warns once, TG_LIMITER_PER_REQUEST, of route options made in the handler', async () => {
    const { default: tollgate } = await fresh(() => import('@tollgate/fastify'))
    const { codes, onWarning } = warningSink()
    const app = Fastify()
    await app.register(tollgate, { global: false, onWarning })
    app.get('/', async (request, reply) => {
      const verdict = await app.tollgate.check(request, { windows: WINDOWS, rule: 'api' }, reply)
      return reply.code(verdict.action === 'continue' ? 200 : verdict.status).send('ok')
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const served = { request: supertest(app.server), close: () => app.close() }
    expect(await threeRequests(served)).toEqual([200, 200, 200])
    expect(codes).toEqual(['TG_LIMITER_PER_REQUEST'])
  })

  it('Hono: warns once, TG_LIMITER_PER_REQUEST', async () => {
    const { rateLimit } = await fresh(() => import('@tollgate/hono'))
    const { codes, onWarning } = warningSink()
    const app = new Hono()
    app.use((c, next) => rateLimit({ windows: WINDOWS, onWarning })(c, next))
    app.get('/', (c) => c.text('ok'))
    expect(await threeRequests(await serveOnLoopback(getRequestListener(app.fetch)))).toEqual([200, 200, 200])
    expect(codes).toEqual(['TG_LIMITER_PER_REQUEST'])
  })
})

describe('a rate limit middleware made once', () => {
  it('Express: never warns, a route and the app limited', async () => {
    const { rateLimit } = await fresh(() => import('@tollgate/express'))
    const { codes, onWarning } = warningSink()
    const app = express()
    app.use(rateLimit({ windows: WINDOWS, onWarning }))
    app.get('/', rateLimit({ rule: 'home', windows: WINDOWS, onWarning }), (_req, res) => {
      res.send('ok')
    })
    expect(await threeRequests(await serveOnLoopback(app))).toEqual([200, 200, 200])
    expect(codes).toEqual([])
  })

  it('Koa: never warns', async () => {
    const { rateLimit } = await fresh(() => import('@tollgate/koa'))
    const { codes, onWarning } = warningSink()
    const app = new Koa()
    const limit = rateLimit({ windows: WINDOWS, onWarning })
    // Applied by hand in a middleware of the app's own: made once all the same.
    app.use((ctx, next) => limit(ctx, next))
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    expect(await threeRequests(await serveOnLoopback(app.callback()))).toEqual([200, 200, 200])
    expect(codes).toEqual([])
  })

  it('Fastify: never warns, the plugin on every route and route options made once checked by hand', async () => {
    const { default: tollgate } = await fresh(() => import('@tollgate/fastify'))
    const { codes, onWarning } = warningSink()
    const app = Fastify()
    await app.register(tollgate, { windows: WINDOWS, onWarning })
    const byHand = { windows: WINDOWS, rule: 'by-hand' }
    app.get('/', async (request, reply) => {
      const verdict = await app.tollgate.check(request, byHand, reply)
      return reply.code(verdict.action === 'continue' ? 200 : verdict.status).send('ok')
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const served = { request: supertest(app.server), close: () => app.close() }
    expect(await threeRequests(served)).toEqual([200, 200, 200])
    expect(codes).toEqual([])
  })
})
