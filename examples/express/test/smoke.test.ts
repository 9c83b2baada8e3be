import { createLimiter, type Limiter, MemoryStore } from '@tollgate/core'
import { prometheusMetrics } from '@tollgate/prometheus'
import { describeExampleSmoke } from '@tollgate/test-support/example-smoke'
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
