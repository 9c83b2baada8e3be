import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createLimiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { useRedis } from '@tollgate/test-support'
import express from 'express'
import Fastify from 'fastify'
import Koa from 'koa'
import { afterEach, describe, expect, it } from 'vitest'
import { type AdminHandler, type AdminOptions, adminHandler } from '../src/index.js'
import { openEventStream } from './event-stream.js'

const TOKEN = 'mount-token-0123456789'
const rules = { login: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '1m' }] } } satisfies RulesOptions

/** An app of one framework with the view mounted at /tollgate, as docs/admin.md shows it; resolves to its base URL. */
type Mount = (options: AdminOptions) => Promise<{ url: string; close(): Promise<void> }>

const mounts: Record<string, Mount> = {
  async Express(options) {
    const app = express()
    // A body parser before the view: the reset reads the body it parsed.
    app.use(express.json())
    const view = adminHandler(options)
    app.use('/tollgate', view)
    return listen(createServer(app), view)
  },
  async Fastify(options) {
    const fastify = Fastify()
    const view = adminHandler({ ...options, basePath: '/tollgate' })
    fastify.all('/tollgate/*', (request, reply) => {
      reply.hijack()
      view(Object.assign(request.raw, { body: request.body }), reply.raw)
    })
    await fastify.listen({ port: 0, host: '127.0.0.1' })
    const { port } = fastify.server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      async close() {
        await view.close()
        await fastify.close()
      },
    }
  },
  async Koa(options) {
    const app = new Koa()
    const view = adminHandler({ ...options, basePath: '/tollgate' })
    app.use((ctx, next) => {
      if (!/^\/tollgate(\/|$)/.test(ctx.path)) return next()
      ctx.respond = false
      view(ctx.req, ctx.res)
    })
    return listen(createServer(app.callback()), view)
  },
}

async function listen(server: Server, view: AdminHandler) {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      await view.close()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

const redis = useRedis()
const closing: Array<{ close(): unknown }> = []
afterEach(async () => {
  for (const thing of closing.splice(0).reverse()) await thing.close()
})

describe.each(Object.entries(mounts))('the view mounted in %s', (name, mount) => {
  const prefix = `admin-mount-${name}-${process.pid}:`

  it('serves the page, its libraries and its events under /tollgate/', async () => {
    const app = await mount({ client: redis(), prefix, intervalMs: 20 })
    closing.push(app)
    const page = await fetch(`${app.url}/tollgate/`)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('<script type="module" src="./app.js">')
    const library = await fetch(`${app.url}/tollgate/vendor/preact.js`)
    expect(library.headers.get('content-type')).toContain('text/javascript')
    const stream = await openEventStream(`${app.url}/tollgate/events`)
    closing.push(stream)
    expect((await stream.until('a snapshot came', () => true)).prefix).toBe(prefix)
    expect((await fetch(`${app.url}/elsewhere`)).status).toBe(404)
  })

  it('resets with the token, and answers 403 without it', async () => {
    // Asks Redis every time: a refusal held in the process would outlive the reset for up to a second.
    const limiter = createLimiter({ rules, store: new RedisStore({ client: redis(), prefix, refusalCache: false }) })
    closing.push(limiter)
    await limiter.reset('login', 'user:1')
    for (let i = 0; i < 2; i++) await limiter.consume('login', 'user:1')
    const app = await mount({ client: redis(), prefix, rules, token: TOKEN })
    closing.push(app)
    const reset = (headers: Record<string, string>) =>
      fetch(`${app.url}/tollgate/reset`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: JSON.stringify({ rule: 'login', identifier: 'user:1' }),
      })
    expect((await reset({})).status).toBe(403)
    expect((await limiter.peek('login', 'user:1')).allowed).toBe(false)
    const done = await reset({ Authorization: `Bearer ${TOKEN}` })
    expect(done.status).toBe(200)
    const body = (await done.json()) as { identifier: string }
    expect(body).toMatchObject({ reset: true, rule: 'login' })
    expect(body.identifier).toMatch(/^user:#[0-9a-f]{8}$/)
    expect((await limiter.consume('login', 'user:1')).allowed).toBe(true)
  })
})

it('sends a path without its trailing slash to the page, relatively', async () => {
  const app = await mounts.Express?.({ client: redis(), prefix: `admin-mount-redirect-${process.pid}:` })
  closing.push(app as { close(): unknown })
  const response = await fetch(`${app?.url}/tollgate`, { redirect: 'manual' })
  expect(response.status).toBe(308)
  expect(response.headers.get('location')).toBe('./tollgate/')
  expect((await fetch(`${app?.url}/tollgate`)).url).toBe(`${app?.url}/tollgate/`)
})
