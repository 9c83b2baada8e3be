import { spawn } from 'node:child_process'
import { once } from 'node:events'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { createLimiter, type Limiter, RedisStore } from '@tollgate/core'
import { rateLimit as expressRateLimit } from '@tollgate/express'
import tollgate from '@tollgate/fastify'
import { rateLimit as koaRateLimit } from '@tollgate/koa'
import express from 'express'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import Koa from 'koa'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'

const CONNECTIONS = 2_000
const LIMIT = 100

/**
 * What an application spends on each request before the limiter sees it (logging, parsing,
 * authentication): under a flood the process is busy, and its replies from Redis wait for it.
 */
function busyFor(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // Working, as a request's own handling does.
  }
}
const WORK_PER_REQUEST_MS = 0.2

/** A server that answers 200 behind the adapter, listening on a free loopback port. */
type Serve = (limiter: Limiter) => Promise<{ server: Server; close(): Promise<void> }>

const frameworks: Record<string, Serve> = {
  Express: async (limiter) => {
    const app = express()
    app.use((_req, _res, next) => {
      busyFor(WORK_PER_REQUEST_MS)
      next()
    })
    app.use(expressRateLimit({ limiter, rule: 'api' }))
    app.get('/', (_req, res) => {
      res.send('ok')
    })
    const server = app.listen(0, '127.0.0.1')
    await once(server, 'listening')
    return { server, close: () => new Promise((resolve) => server.close(() => resolve())) }
  },
  Fastify: async (limiter) => {
    const app = Fastify()
    app.addHook('onRequest', (_request, _reply, done) => {
      busyFor(WORK_PER_REQUEST_MS)
      done()
    })
    await app.register(tollgate, { limiter, rule: 'api' })
    app.get('/', async () => 'ok')
    await app.listen({ port: 0, host: '127.0.0.1' })
    return { server: app.server, close: () => app.close() }
  },
  Koa: async (limiter) => {
    const app = new Koa()
    app.use((_ctx, next) => {
      busyFor(WORK_PER_REQUEST_MS)
      return next()
    })
    app.use(koaRateLimit({ limiter, rule: 'api' }))
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    const server = app.listen(0, '127.0.0.1')
    await once(server, 'listening')
    return { server, close: () => new Promise((resolve) => server.close(() => resolve())) }
  },
}

const client = fileURLToPath(new URL('../src/http-flood-client.ts', import.meta.url))

/** How many of `connections` GETs fired at once from another process got each status. */
async function flood(port: number, connections: number): Promise<Record<string, number>> {
  const child = spawn(process.execPath, ['--import', 'tsx', client, String(port), String(connections)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  const [code] = await once(child, 'exit')
  if (code !== 0) throw new Error(`the flood's client exited with ${code}`)
  return JSON.parse(out) as Record<string, number>
}

// A flood through each adapter, with every option at its default: 2,000 connections at once from
// one address and another process, into an app that does some work per request before the limiter. Every request is decided by Redis: exactly the limit passes, the rest are told 429,
// none passes for a store failure or is answered 503.
describe.each(Object.keys(frameworks))('%s under a flood of 2,000 concurrent connections from one client', (name) => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it(`lets exactly ${LIMIT} through and answers the rest 429`, async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `adapters-flood:${process.pid}:${name}:` }),
      rules: { api: { windows: [{ limit: LIMIT, period: '1h' }] } },
      onWarning: () => {},
    })
    const serving = await (frameworks[name] as Serve)(limiter)
    try {
      const { port } = serving.server.address() as AddressInfo
      expect(await flood(port, CONNECTIONS)).toEqual({ 200: LIMIT, 429: CONNECTIONS - LIMIT })
    } finally {
      await serving.close()
      await limiter.close()
    }
  })
})
