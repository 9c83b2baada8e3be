import { createLimiter, type Limiter, MemoryStore } from '@tollgate/core'
import { prometheusMetrics } from '@tollgate/prometheus'
import { describeExampleSmoke } from '@tollgate/test-support/example-smoke'
import { pollUntil } from '@tollgate/test-support/poll'
import { Registry } from 'prom-client'
import request from 'supertest'
import { afterEach, describe, expect, it } from 'vitest'
import { createApp } from '../src/app.js'
import { rules } from '../src/rules.js'

describeExampleSmoke('express', { rules, open: (limiter) => createApp({ limiter }) })

describe('express example metrics', () => {
  let limiter: Limiter | undefined
  afterEach(async () => {
    await limiter?.close()
    limiter = undefined
  })

  it('serves what the limiter counted at /metrics, unlimited', async () => {
    limiter = createLimiter({ store: new MemoryStore({ clock: () => 1_700_000_000_000 }), rules })
    const registry = new Registry()
    prometheusMetrics(limiter, { registry })
    const app = createApp({ limiter, registry })
    for (let i = 0; i < 6; i++) {
      await request(app).post('/login').send({ username: 'carol', password: 'x' })
    }
    const res = await request(app).get('/metrics').expect(200)

    expect(res.headers['content-type']).toMatch(/^text\/plain/)
    expect(res.headers.ratelimit).toBeUndefined()
    const lines = res.text.split('\n')
    expect(lines).toContain('tollgate_decisions_total{rule="auth.createToken",outcome="allowed"} 5')
    expect(lines).toContain('tollgate_decisions_total{rule="auth.createToken",outcome="limited"} 1')
    expect(lines).toContain('tollgate_window_denials_total{rule="auth.createToken",window="3s"} 1')
    expect(res.text).not.toContain('carol')
  })
})

describe('express example: lockouts and a tenant hierarchy', () => {
  let limiter: Limiter | undefined
  afterEach(async () => {
    await limiter?.close()
    limiter = undefined
  })

  it('locks a username out of /otp/verify after its third wrong code, for 15 minutes', async () => {
    limiter = createLimiter({ store: new MemoryStore({ clock: () => 1_700_000_000_000 }), rules })
    const app = createApp({ limiter })
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      statuses.push((await request(app).post('/otp/verify').send({ username: 'dave', code: '123456' })).status)
    }
    expect(statuses).toEqual([200, 200, 200, 429])
    const locked = await request(app).post('/otp/verify').send({ username: 'dave', code: '000000' })
    expect([locked.status, locked.headers['retry-after']]).toEqual([429, '900'])
    expect((await request(app).post('/otp/verify').send({ username: 'erin', code: '000000' })).status).toBe(200)
  })

  it('holds each user, each organisation and everyone to their own limits in one decision', async () => {
    limiter = createLimiter({ store: new MemoryStore({ clock: () => 1_700_000_000_000 }), rules })
    const app = createApp({ limiter })
    const statuses = async (org: string, user: string, times: number) => {
      const got: number[] = []
      for (let i = 0; i < times; i++)
        got.push((await request(app).get(`/orgs/${org}/reports`).set('x-user-id', user)).status)
      return got
    }
    // A test organisation is held to 2 a minute, whichever of its users asks.
    expect([...(await statuses('ci-test', 'u1', 2)), ...(await statuses('ci-test', 'u2', 1))]).toEqual([200, 200, 429])
    // A user to 10, within acme's 100.
    expect((await statuses('acme', 'u3', 11)).filter((status) => status === 429)).toHaveLength(1)
    const refused = await request(app).get('/orgs/acme/reports').set('x-user-id', 'u3')
    expect(refused.headers['ratelimit-policy']).toContain('"reports.org-60s";q=100;w=60')
  })

  it('charges /complete the tokens its answer took, once it is sent: past the limit, debt to wait out', async () => {
    limiter = createLimiter({ store: new MemoryStore({ clock: () => 1_700_000_000_000 }), rules })
    const app = createApp({ limiter })
    const left = async () => (await limiter?.peek('llm.tokens', 'user:7', { cost: 0 }))?.windows[0]?.remaining
    const untilLeft = (what: string, expected: number) =>
      pollUntil(what, 5_000, async () => {
        const now = await left()
        return now === expected ? { done: true, value: undefined } : { done: false, state: `${now} left` }
      })
    const short = await request(app)
      .post('/complete')
      .set('x-user-id', '7')
      .send({ prompt: 'x'.repeat(400) })
    expect(short.status).toBe(200)
    // 500 estimated on arrival, 200 taken once the answer went out.
    await untilLeft('settled', 9_800)
    await request(app)
      .post('/complete')
      .set('x-user-id', '7')
      .send({ prompt: 'x'.repeat(20_000) })
      .expect(200)
    await untilLeft('in debt', 0)
    const refused = await request(app).post('/complete').set('x-user-id', '7').send({ prompt: 'hi' })
    // 200 of debt and 500 for the estimate, at 10,000 a minute.
    expect([refused.status, refused.headers['retry-after']]).toEqual([429, '5'])
  })
})
