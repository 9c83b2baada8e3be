import { randomUUID } from 'node:crypto'
import { createLimiter, type Limiter, MemoryStore, RedisStore, type RulesOptions, type Store } from '@tollgate/core'
import { Redis } from 'ioredis'
import request from 'supertest'
import { afterEach, describe, expect, inject, it } from 'vitest'
import './provided-context.js'

/** What supertest sends requests to: a request listener or an HTTP server, bound to 127.0.0.1 by supertest. */
export type SmokeTarget = Parameters<typeof request>[0]

/** An example app as its smoke test reaches it. */
export interface ExampleUnderTest {
  /** The example's rules (its src/rules.ts). */
  rules: RulesOptions
  /** The example's app deciding on `limiter`. */
  open(limiter: Limiter): SmokeTarget | Promise<SmokeTarget>
  /** Closes what `open` made, before the limiter is closed. */
  close?(): Promise<void>
}

/**
 * The scenario every example app answers the same way, whatever its framework: the login, API and
 * upload rules of the examples' src/rules.ts, in memory and on the test Redis. Time moves only when
 * a test moves it, so no window frees up between two requests.
 */
export function describeExampleSmoke(name: string, example: ExampleUnderTest): void {
  let now = 1_700_000_000_000
  const clock = () => now
  let limiter: Limiter | undefined

  async function appOn(store: Store = new MemoryStore({ clock })): Promise<SmokeTarget> {
    limiter = createLimiter({ store, rules: example.rules })
    return example.open(limiter)
  }

  async function closeApp(): Promise<void> {
    await example.close?.()
    await limiter?.close()
    limiter = undefined
  }

  afterEach(closeApp)

  const login = (app: SmokeTarget, username: string) =>
    request(app).post('/login').send({ username, password: 'x' }).expect('content-type', /json/)

  async function loginScenario(app: SmokeTarget) {
    const alice: number[] = []
    for (let i = 0; i < 6; i++) alice.push((await login(app, 'alice')).status)
    const bobRefused = await login(app, 'bob')
    now += 3000
    const bobLater = await login(app, 'bob')
    return { alice, bobRefused, bobLater }
  }

  describe(`${name} example`, () => {
    it('passes five logins for alice and refuses the sixth with the 3 s window named', async () => {
      const app = await appOn()
      for (let i = 1; i <= 5; i++) {
        const res = await login(app, 'alice').expect(200)
        expect(res.body.token).toMatch(/^fake-alice-/)
        expect(res.headers.ratelimit).toContain(`"auth.createToken-3s";r=${5 - i};t=3`)
      }
      const refused = await login(app, 'alice').expect(429)
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/)
      expect(refused.headers['retry-after']).toBe('3')
      expect(refused.body['violated-policies']).toEqual(['auth.createToken-3s'])
      expect(refused.headers['ratelimit-policy']).toBe(
        '"auth.createToken-60s";q=20;w=60, "auth.createToken-3s";q=5;w=3',
      )
      expect(refused.headers.ratelimit).toBe('"auth.createToken-60s";r=15;t=60, "auth.createToken-3s";r=0;t=3')
    })

    it('refuses another username from the same address once the address has used its 5 per 3 s', async () => {
      const { bobRefused, bobLater } = await loginScenario(await appOn())
      // bob's own windows are empty, but the decision also charges ip:127.0.0.1, whose 3 s window
      // is full: one refusing window refuses the whole decision, and charges nothing anywhere.
      expect(bobRefused.status).toBe(429)
      expect(bobRefused.headers.ratelimit).toContain('"auth.createToken-3s";r=0')
      // Three seconds later the address has room again. Its minute window holds alice's five and
      // this one, not the refused attempts (14 left, not 12): refusals cost nothing. The first of
      // alice's frees up 57 s from now.
      expect(bobLater.status).toBe(200)
      expect(bobLater.headers.ratelimit).toBe('"auth.createToken-60s";r=14;t=57, "auth.createToken-3s";r=4;t=3')
    })

    it('counts /api/items per user under api.read and reports its parent api', async () => {
      const app = await appOn()
      const asUser = (id: string) => request(app).get('/api/items').set('x-user-id', id)
      for (let i = 0; i < 3; i++) await asUser('1').expect(200)
      const user1 = await asUser('1').expect(200)
      expect(user1.headers.ratelimit).toContain('"api.read-60s";r=96')
      expect(user1.headers.ratelimit).toContain('"api-60s";r=996')
      const user2 = await asUser('2').expect(200)
      expect(user2.headers.ratelimit).toContain('"api.read-60s";r=99')
      expect(user2.headers.ratelimit).toContain('"api-60s";r=999')

      for (let i = 0; i < 96; i++) await asUser('1').expect(200)
      const refused = await asUser('1').expect(429)
      expect(refused.body['violated-policies']).toEqual(['api.read-60s'])
      expect(refused.headers.ratelimit).toContain('"api.read-60s";r=0')
      await asUser('2').expect(200)
    })

    it('charges uploads by their bytes: 600,000 passes, the next 600,000 does not', async () => {
      const app = await appOn()
      const upload = () =>
        request(app).post('/upload').set('content-type', 'application/octet-stream').send(Buffer.alloc(600_000))
      const first = await upload().expect(200, { received: 600_000 })
      expect(first.headers['ratelimit-policy']).toBe('"upload.bytes-60s";q=1000000;w=60;qu="content-bytes"')
      expect(first.headers.ratelimit).toBe('"upload.bytes-60s";r=400000;t=60')
      const second = await upload().expect(429)
      expect(second.headers['retry-after']).toBe('60')
    })

    // Regression: a chunked upload declares no Content-Length, cost 0, and two of 600 KB both passed.
    it('refuses a chunked upload with 411, charging nothing, so the byte quota holds', async () => {
      const app = await appOn()
      const chunked = async () => {
        const upload = request(app).post('/upload').set('content-type', 'application/octet-stream')
        // Written, not sent whole: the body goes chunked, without a Content-Length.
        upload.write(Buffer.alloc(300_000))
        upload.write(Buffer.alloc(300_000))
        return upload
      }
      for (let i = 0; i < 2; i++) {
        const refused = await chunked()
        expect(refused.status).toBe(411)
        expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/)
        expect(refused.headers.ratelimit).toBeUndefined()
      }
      const declared = await request(app)
        .post('/upload')
        .set('content-type', 'application/octet-stream')
        .send(Buffer.alloc(600_000))
        .expect(200, { received: 600_000 })
      expect(declared.headers.ratelimit).toBe('"upload.bytes-60s";r=400000;t=60')
    })

    it('does not limit /health', async () => {
      const res = await request(await appOn())
        .get('/health')
        .expect(200, { ok: true })
      expect(res.headers.ratelimit).toBeUndefined()
      expect(res.headers['ratelimit-policy']).toBeUndefined()
    })

    it('gives the same login answers on Redis', async () => {
      const client = new Redis(inject('redisUrl'))
      try {
        const prefix = `example-${name}:${randomUUID()}:`
        const onRedis = await loginScenario(await appOn(new RedisStore({ client, clock, prefix })))
        expect(onRedis.alice).toEqual([200, 200, 200, 200, 200, 429])
        expect(onRedis.bobRefused.status).toBe(429)
        expect(onRedis.bobLater.status).toBe(200)
      } finally {
        await closeApp()
        await client.quit()
      }
    })
  })
}
