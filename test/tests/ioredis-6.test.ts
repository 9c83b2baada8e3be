// @tollgate/core's peer range takes ioredis 5 and 6, and a fresh install resolves 6 while the
// rest of the suite runs 5: the store conformance suite and a Cluster decision run on 6 as well.
// ioredis 6 speaks RESP3, which changes how script replies and errors come back.
import { createLimiter, RedisStore } from '@tollgate/core'
import { Cluster, Redis } from 'ioredis6'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { spawnRedisCluster, waitReady } from '../src/redis-cluster.js'
import { keysWithTtl, keyValues } from '../src/redis-keys.js'
import { runStoreConformance } from '../src/store-conformance.js'

runStoreConformance('RedisStore on ioredis 6', async () => {
  const client = new Redis(inject('redisUrl'))
  let prefix = ''
  let made = 0
  return {
    makeStore(clock) {
      prefix = `ioredis6:${process.pid}:${made++}:`
      return new RedisStore({ client, clock, prefix })
    },
    keys: () => keysWithTtl(client as unknown as Parameters<typeof keysWithTtl>[0], prefix),
    snapshot: () => keyValues(client as unknown as Parameters<typeof keyValues>[0], prefix),
    close: async () => {
      await client.quit()
    },
  }
})

describe('RedisStore on ioredis 6', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it("fails a decision over a key of the wrong type alone, with Redis's own words", async () => {
    const store = new RedisStore({ client, prefix: `ioredis6-wrongtype:${process.pid}:` })
    const limiter = createLimiter({ store, rules: { r: { windows: [{ limit: 5, period: '1m' }] } } })
    const key = store.keyOf({
      rule: limiter.rules.get('r')!.stateName,
      algorithm: 'sliding-log',
      windows: [],
      identifier: 'ip:a',
    })
    await client.set(key, 'not a log', 'EX', 60)
    const [broken, fine] = await Promise.all([limiter.consume('r', 'ip:a'), limiter.consume('r', 'ip:b')])
    expect(broken).toMatchObject({ allowed: true, reason: 'store-error-allowed' })
    expect(broken.error?.message).toMatch(/WRONGTYPE/)
    expect(fine).toMatchObject({ allowed: true, reason: 'ok' })
    expect(limiter.breakerState).toBe('closed')
    await limiter.close()
  })
})

describe('RedisStore on an ioredis 6 Cluster', () => {
  let cluster: Awaited<ReturnType<typeof spawnRedisCluster>>
  let client: Cluster
  beforeAll(async () => {
    cluster = await spawnRedisCluster()
    client = new Cluster(cluster.startupNodes, { enableReadyCheck: true })
    await waitReady(client as unknown as Parameters<typeof waitReady>[0])
  }, 60_000)
  afterAll(async () => {
    await client?.quit()
    await cluster?.stop()
  })

  it('decides two identifiers in two slots exactly', async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client }),
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '1m' }] } },
      // A bound that a loaded machine cannot reach: a timeout would read as a pass.
      storeTimeoutMs: 10_000,
    })
    const decisions = []
    for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('r', ['ip:203.0.113.7', 'user:42']))
    expect(decisions.map((d) => d.reason)).toEqual(['ok', 'ok', 'ok', 'limited'])
    expect(decisions[3]?.windows.map((w) => w.remaining)).toEqual([0, 0])
    await limiter.close()
  })
})
