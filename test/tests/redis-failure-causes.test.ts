import {
  type BreakerState,
  createLimiter,
  type Decision,
  RedisStore,
  type RulesOptions,
  type TollgateError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { pollUntil } from '../src/poll.js'
import { waitReady } from '../src/redis-cluster.js'
import { withNode } from '../src/redis-one-off-connection.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

const started: Array<() => Promise<unknown>> = []

afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop().catch(() => {})
})

async function startRedis(): Promise<{ server: SpawnedRedis; client: Redis }> {
  const server = await spawnRedisServer()
  started.push(() => server.stop())
  const client = new Redis(server.url)
  started.push(async () => client.disconnect())
  await waitReady(client)
  return { server, client }
}

const rules = { login: { windows: [{ limit: 5, period: '1h' }] } } satisfies RulesOptions

// Regression: a key of the wrong type failed its identifier's decisions, as it should; but after
// three of them the circuit breaker opened, and every other identifier got store-error-* too.
describe('a broken key', () => {
  it("fails only its identifier's decisions and leaves the breaker closed", async () => {
    const { client } = await startRedis()
    const store = new RedisStore({ client, prefix: 'broken:' })
    const limiter = createLimiter({ store, rules, onStoreError: 'deny', breaker: { failureThreshold: 3 } })
    started.push(() => limiter.close())
    const broken = 'user:broken'
    const login = limiter.rules.get('login')!.stateName
    await client.set(store.keyOf({ rule: login, algorithm: 'sliding-log', windows: [], identifier: broken }), 'x')
    const changes: BreakerState[] = []
    limiter.on('breaker', (change) => changes.push(change.state))
    const storeErrors: TollgateError[] = []
    limiter.on('store-error', (error) => storeErrors.push(error))

    const failed: Decision[] = []
    const others: Decision[] = []
    for (let i = 0; i < 10; i++) {
      failed.push(await limiter.consume('login', broken))
      others.push(await limiter.consume('login', `user:${i}`))
    }

    expect(changes).toEqual([])
    expect(limiter.breakerState).toBe('closed')
    expect(others.map((decision) => decision.reason)).toEqual(Array(10).fill('ok'))
    for (const decision of failed) {
      expect(decision).toMatchObject({ allowed: false, reason: 'store-error-denied' })
      expect(decision.error).toMatchObject({ code: 'TG_STORE', storeDown: false, message: /WRONGTYPE/ })
    }
    // Each failure is still reported, naming the key it met.
    expect(storeErrors).toHaveLength(10)
    expect(storeErrors[0]?.message).toContain(`broken:${login}:{user:broken}:sl`)
  })

  it('is told apart from a refusal Redis gives every decision, such as OOM, which opens the breaker', async () => {
    const { client } = await startRedis()
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: 'oom:' }),
      rules,
      onStoreError: 'deny',
      breaker: { failureThreshold: 3 },
    })
    started.push(() => limiter.close())
    await client.config('SET', 'maxmemory', '1')
    const decisions: Decision[] = []
    for (let i = 0; i < 3; i++) decisions.push(await limiter.consume('login', `user:${i}`))
    for (const decision of decisions) {
      expect(decision.error).toMatchObject({ storeDown: true, message: /OOM command not allowed/ })
    }
    expect(limiter.breakerState).toBe('open')
  })
})

// Regression: Redis restarted with a new password; 42 of 43 decisions said only that the store
// did not answer within 100 ms, though ioredis had been told NOAUTH on every reconnection.
describe('a decision the store does not answer', () => {
  it('says what Redis last said, and stops saying it once Redis answers again', async () => {
    const server = await spawnRedisServer()
    started.push(() => server.stop())
    let reconnectAfterMs = 50
    const client = new Redis(server.url, { retryStrategy: () => reconnectAfterMs })
    started.push(async () => client.disconnect())
    await waitReady(client)
    const store = new RedisStore({ client, prefix: 'noauth:' })
    const limiter = createLimiter({ store, rules, onStoreError: 'deny', storeTimeoutMs: 100 })
    started.push(() => limiter.close())
    const storeErrors: TollgateError[] = []
    limiter.on('store-error', (error) => storeErrors.push(error))
    expect((await limiter.consume('login', 'user:1')).reason).toBe('ok')

    const refused = new Promise<Error>((resolve) => {
      const onError = (error: Error) => {
        if (!error.message.includes('NOAUTH')) return
        // Called before ioredis schedules its next attempt: none comes during the test, so the
        // decisions below wait in its offline queue until they time out.
        reconnectAfterMs = 60_000
        client.off('error', onError)
        resolve(error)
      }
      client.on('error', onError)
    })
    await withNode(server.port, async (admin) => {
      await admin.config('SET', 'requirepass', 'new-secret')
      // Every connection but this one: the client reconnects, and Redis now wants a password.
      await admin.client('KILL', 'TYPE', 'normal')
    })
    const noauth = await refused

    const decisions: Decision[] = []
    for (let i = 0; i < 10; i++) decisions.push(await limiter.consume('login', 'user:1'))
    const said = '; the store last said: NOAUTH Authentication required.'
    expect(decisions.map((d) => [d.reason, d.error?.message])).toEqual([
      ...Array(3).fill(['store-error-denied', `the store did not answer within 100 ms${said}`]),
      ...Array(7).fill(['store-error-denied', `the store is failing: its circuit breaker is open${said}`]),
    ])
    for (const decision of decisions) expect(decision.error?.cause).toBe(noauth)
    expect(storeErrors.map((error) => error.message)).toEqual(Array(3).fill(decisions[0]?.error?.message))

    // The client learns the password; once Redis answers, the old error is no longer named.
    client.options.password = 'new-secret'
    await client.connect()
    await pollUntil('a decision answered by Redis again', 10_000, async () => {
      const { reason } = await limiter.consume('login', 'user:2')
      return reason === 'ok' ? { done: true, value: undefined } : { done: false, state: reason }
    })
    expect(store.recentError()).toBeUndefined()
  })

  it('listens on the client once per client, and no longer once every store is closed', async () => {
    const { client } = await startRedis()
    const before = client.listenerCount('error')
    const first = new RedisStore({ client, prefix: 'listen:1:' })
    const second = new RedisStore({ client, prefix: 'listen:2:' })
    expect(client.listenerCount('error')).toBe(before + 1)
    await first.close()
    expect(client.listenerCount('error')).toBe(before + 1)
    await second.close()
    await second.close()
    expect(client.listenerCount('error')).toBe(before)
    expect(client.status).toBe('ready')
  })
})
