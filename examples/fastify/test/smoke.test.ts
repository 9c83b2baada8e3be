import { randomUUID } from 'node:crypto'
import { Readable } from 'node:stream'
import { createLimiter, type Limiter, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, inject, it } from 'vitest'
import '@tollgate/test-support/provided-context'
import { createApp } from '../src/app.js'
import { rules } from '../src/rules.js'

// Time moves only when a test moves it, so no window frees up between two requests.
let now = 1_700_000_000_000
const clock = () => now
let limiter: Limiter | undefined
let app: FastifyInstance | undefined

async function appOn(store: Store = new MemoryStore({ clock })): Promise<FastifyInstance> {
  limiter = createLimiter({ store, rules })
  app = await createApp({ limiter })
  return app
}

afterEach(async () => {
  await app?.close()
  await limiter?.close()
  app = undefined
  limiter = undefined
})

// fastify.inject runs requests through the app without a socket; the client address is 127.0.0.1.
const login = (app: FastifyInstance, username: string) =>
  app.inject({ method: 'POST', url: '/login', payload: { username, password: 'x' } })

async function loginScenario(app: FastifyInstance) {
  const alice: number[] = []
  for (let i = 0; i < 6; i++) alice.push((await login(app, 'alice')).statusCode)
  const bobRefused = await login(app, 'bob')
  now += 3000
  const bobLater = await login(app, 'bob')
  return { alice, bobRefused, bobLater }
}

describe('fastify example', () => {
  it('passes five logins for alice and refuses the sixth with the 3 s window named', async () => {
    const app = await appOn()
    for (let i = 1; i <= 5; i++) {
      const res = await login(app, 'alice')
      expect(res.statusCode).toBe(200)
      expect(res.json().token).toMatch(/^fake-alice-/)
      expect(res.headers.ratelimit).toContain(`"auth.createToken-3s";r=${5 - i};t=3`)
    }
    const refused = await login(app, 'alice')
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/)
    expect(refused.headers['retry-after']).toBe('3')
    expect(refused.json()['violated-policies']).toEqual(['auth.createToken-3s'])
    expect(refused.headers['ratelimit-policy']).toBe('"auth.createToken-60s";q=20;w=60, "auth.createToken-3s";q=5;w=3')
    expect(refused.headers.ratelimit).toBe('"auth.createToken-60s";r=15;t=60, "auth.createToken-3s";r=0;t=3')
  })

  it('refuses another username from the same address once the address has used its 5 per 3 s', async () => {
    const { bobRefused, bobLater } = await loginScenario(await appOn())
    // bob's own windows are empty, but the decision also charges ip:127.0.0.1, whose 3 s window
    // is full: one refusing window refuses the whole decision, and charges nothing anywhere.
    expect(bobRefused.statusCode).toBe(429)
    expect(bobRefused.headers.ratelimit).toContain('"auth.createToken-3s";r=0')
    // Three seconds later the address has room again. Its minute window holds alice's five and
    // this one, not the refused attempts (14 left, not 12): refusals cost nothing. The first of
    // alice's frees up 57 s from now.
    expect(bobLater.statusCode).toBe(200)
    expect(bobLater.headers.ratelimit).toBe('"auth.createToken-60s";r=14;t=57, "auth.createToken-3s";r=4;t=3')
  })

  it('counts /api/items per user under api.read and reports its parent api', async () => {
    const app = await appOn()
    const asUser = (id: string) => app.inject({ method: 'GET', url: '/api/items', headers: { 'x-user-id': id } })
    for (let i = 0; i < 3; i++) expect((await asUser('1')).statusCode).toBe(200)
    const user1 = await asUser('1')
    expect(user1.statusCode).toBe(200)
    expect(user1.headers.ratelimit).toContain('"api.read-60s";r=96')
    expect(user1.headers.ratelimit).toContain('"api-60s";r=996')
    const user2 = await asUser('2')
    expect(user2.statusCode).toBe(200)
    expect(user2.headers.ratelimit).toContain('"api.read-60s";r=99')
    expect(user2.headers.ratelimit).toContain('"api-60s";r=999')

    for (let i = 0; i < 96; i++) expect((await asUser('1')).statusCode).toBe(200)
    const refused = await asUser('1')
    expect(refused.statusCode).toBe(429)
    expect(refused.json()['violated-policies']).toEqual(['api.read-60s'])
    expect(refused.headers.ratelimit).toContain('"api.read-60s";r=0')
    expect((await asUser('2')).statusCode).toBe(200)
  })

  it('charges uploads by their bytes: 600,000 passes, the next 600,000 does not', async () => {
    const app = await appOn()
    const upload = () =>
      app.inject({
        method: 'POST',
        url: '/upload',
        headers: { 'content-type': 'application/octet-stream' },
        payload: Buffer.alloc(600_000),
      })
    const first = await upload()
    expect(first.statusCode).toBe(200)
    expect(first.json()).toEqual({ received: 600_000 })
    expect(first.headers['ratelimit-policy']).toBe('"upload.bytes-60s";q=1000000;w=60;qu="content-bytes"')
    expect(first.headers.ratelimit).toBe('"upload.bytes-60s";r=400000;t=60')
    const second = await upload()
    expect(second.statusCode).toBe(429)
    expect(second.headers['retry-after']).toBe('60')
  })

  // Regression: a chunked upload declares no Content-Length, cost 0, and two of 600 KB both passed.
  it('refuses an upload without a Content-Length with 411, charging nothing, so the byte quota holds', async () => {
    const app = await appOn()
    // A stream payload goes without a Content-Length, as a chunked upload does.
    const chunked = () =>
      app.inject({
        method: 'POST',
        url: '/upload',
        headers: { 'content-type': 'application/octet-stream' },
        payload: Readable.from([Buffer.alloc(300_000), Buffer.alloc(300_000)]),
      })
    for (let i = 0; i < 2; i++) {
      const refused = await chunked()
      expect(refused.statusCode).toBe(411)
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/)
      expect(refused.headers.ratelimit).toBeUndefined()
    }
    const declared = await app.inject({
      method: 'POST',
      url: '/upload',
      headers: { 'content-type': 'application/octet-stream' },
      payload: Buffer.alloc(600_000),
    })
    expect(declared.statusCode).toBe(200)
    expect(declared.headers.ratelimit).toBe('"upload.bytes-60s";r=400000;t=60')
  })

  it('does not limit /health', async () => {
    const res = await (await appOn()).inject({ method: 'GET', url: '/health' })
    expect(res.statusCode).toBe(200)
    expect(res.json()).toEqual({ ok: true })
    expect(res.headers.ratelimit).toBeUndefined()
    expect(res.headers['ratelimit-policy']).toBeUndefined()
  })

  it('gives the same login answers on Redis', async () => {
    const client = new Redis(inject('redisUrl'))
    try {
      const prefix = `example-fastify:${randomUUID()}:`
      const onRedis = await loginScenario(await appOn(new RedisStore({ client, clock, prefix })))
      expect(onRedis.alice).toEqual([200, 200, 200, 200, 200, 429])
      expect(onRedis.bobRefused.statusCode).toBe(429)
      expect(onRedis.bobLater.statusCode).toBe(200)
    } finally {
      await app?.close()
      app = undefined
      await limiter?.close()
      limiter = undefined
      await client.quit()
    }
  })
})
