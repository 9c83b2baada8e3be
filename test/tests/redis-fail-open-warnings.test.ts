import { createLimiter, type Limiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { waitReady } from '../src/redis-cluster.js'
import { spawnRedisServer } from '../src/redis-server.js'

const started: Array<() => Promise<unknown>> = []

afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop().catch(() => {})
})

const rules = { api: { windows: [{ limit: 1_000, period: '1m' }] } } satisfies RulesOptions
const IP = 'ip:203.0.113.7'

// Regression: under the default onStoreError 'allow', a dead Redis let every request through
// without a word unless the application listened to 'store-error'.
describe('a Redis that dies and comes back, under the default policy', () => {
  it('warns once as decisions start failing open and once when Redis answers again, unless store-error is heard', async () => {
    const server = await spawnRedisServer()
    started.push(() => server.stop())
    // Fail fast while Redis is gone: each decision fails at once instead of at its bound.
    const client = new Redis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false })
    started.push(async () => client.disconnect())
    client.on('error', () => {})
    await waitReady(client)

    function limiterWith(warnings: string[]): Limiter<'api'> {
      const limiter = createLimiter({
        store: new RedisStore({ client, prefix: 'fail-open:' }),
        rules,
        // A breaker that stays closed: every decision asks Redis, the first after its return included.
        breaker: { failureThreshold: 1000 },
        onWarning: (message, code) => warnings.push(`${code}: ${message}`),
      })
      started.push(() => limiter.close())
      return limiter
    }
    const warned: string[] = []
    const unheard = limiterWith(warned)
    const heardWarnings: string[] = []
    const heard = limiterWith(heardWarnings)
    const heardErrors: string[] = []
    heard.on('store-error', (error) => heardErrors.push(error.message))

    expect((await unheard.consume('api', IP)).reason).toBe('ok')
    expect((await heard.consume('api', IP)).reason).toBe('ok')

    server.kill('SIGKILL')
    await server.stop()
    for (let i = 0; i < 5; i++) {
      expect((await unheard.consume('api', IP)).reason).toBe('store-error-allowed')
      expect((await heard.consume('api', IP)).reason).toBe('store-error-allowed')
    }
    expect(warned).toHaveLength(1)
    expect(warned[0]).toMatch(/^TG_STORE_FAILING_OPEN: decisions are failing open: /)

    // Not events.once: it rejects on the 'error' each refused reconnection emits meanwhile.
    const ready = new Promise((resolve) => client.once('ready', resolve))
    const restarted = await spawnRedisServer({ port: server.port })
    started.push(() => restarted.stop())
    await ready
    expect((await unheard.consume('api', IP)).reason).toBe('ok')
    expect((await heard.consume('api', IP)).reason).toBe('ok')
    expect(warned).toHaveLength(2)
    expect(warned[1]).toBe(
      'TG_STORE_RECOVERED: the store answers again: decisions are limited again, after 5 decisions failed open',
    )

    expect(heardErrors).toHaveLength(5)
    expect(heardWarnings).toEqual([])
  }, 30_000)
})
