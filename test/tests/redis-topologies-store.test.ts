import { ALGORITHMS, createLimiter, RedisStore, type RuleOptions } from '@tollgate/core'
import calculateSlot from 'cluster-key-slot'
import type { Cluster, Redis } from 'ioredis'
import { Redis as RedisClient } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clusterClient, type SpawnedCluster, spawnRedisCluster, waitReady } from '../src/redis-cluster.js'
import { keysWithTtl } from '../src/redis-keys.js'
import { type SpawnedSentinel, sentinelClient, spawnRedisSentinel } from '../src/redis-sentinel.js'

const login = {
  algorithm: 'sliding-log' as const,
  windows: [
    { limit: 20, period: '60s' },
    { limit: 5, period: '3s' },
  ],
} satisfies RuleOptions

describe('RedisStore on a 3-master Cluster', () => {
  let cluster: SpawnedCluster
  let client: Cluster
  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3 })
    client = clusterClient(cluster)
    await waitReady(client)
  }, 60_000)
  afterAll(async () => {
    await client?.quit()
    await cluster?.stop()
  })

  it('spreads identifiers over every master and gives every key a TTL', async () => {
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'spread:' }), rules: { login } })
    for (let i = 0; i < 300; i++) expect((await limiter.consume('login', `ip:10.0.0.${i}`)).allowed).toBe(true)
    const perMaster = await Promise.all(
      cluster.nodes.map(async (node) => {
        const direct = new RedisClient(node.url)
        const keys = await keysWithTtl(direct, 'spread:')
        direct.disconnect()
        return keys
      }),
    )
    expect(perMaster.reduce((sum, keys) => sum + keys.length, 0)).toBe(300)
    for (const keys of perMaster) {
      expect(keys.length).toBeGreaterThan(50)
      for (const { ttlMs } of keys) expect(ttlMs).toBeGreaterThan(0)
    }
  })

  it('decides for identifiers in different slots, with parents, without CROSSSLOT', async () => {
    const store = new RedisStore({ client, prefix: 'multi:' })
    const limiter = createLimiter({
      store,
      rules: { login: { ...login, parent: 'site' }, site: { windows: [{ limit: 1000, period: '1h' }] } },
    })
    const ids = ['ip:203.0.113.7', 'user:42']
    const slots = ids.map((identifier) =>
      calculateSlot(store.keyOf({ rule: 'login', algorithm: 'sliding-log', windows: [], identifier })),
    )
    expect(slots[0]).not.toBe(slots[1])
    for (let i = 0; i < 5; i++) expect((await limiter.consume('login', ids)).allowed).toBe(true)
    const refused = await limiter.consume('login', ids)
    expect(refused.allowed).toBe(false)
    expect(refused.windows.map((w) => [w.rule, w.identifier, w.remaining, w.failed])).toEqual([
      ['login', 'ip:203.0.113.7', 15, false],
      ['login', 'ip:203.0.113.7', 0, true],
      ['login', 'user:42', 15, false],
      ['login', 'user:42', 0, true],
      ['site', 'ip:203.0.113.7', 995, false],
      ['site', 'user:42', 995, false],
    ])
  })

  it.each(ALGORITHMS)('charges no slot when another slot refuses (%s)', async (algorithm) => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `undo:${algorithm}:` }),
      rules: { login: { algorithm, windows: [{ limit: 3, period: '1h' }] } },
    })
    for (let i = 0; i < 3; i++) await limiter.consume('login', ['ip:198.51.100.1', 'user:7'])
    for (let i = 0; i < 5; i++) {
      const refused = await limiter.consume('login', ['ip:198.51.100.2', 'user:7'])
      expect(refused.allowed).toBe(false)
      expect(refused.windows.map((w) => [w.identifier, w.failed])).toEqual([
        ['ip:198.51.100.2', false],
        ['user:7', true],
      ])
    }
    // The address's slot was charged and then undone five times over: it still has all 3.
    expect((await limiter.peek('login', 'ip:198.51.100.2')).windows[0]?.remaining).toBe(3)
  })

  it('decides a hierarchy keyed by kind, a block and a settled reservation across slots', async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: 'levels:' }),
      rules: {
        user: { windows: [{ limit: 3, period: '1h' }], by: ['user'], parent: 'org', block: { for: '1h' } },
        org: { windows: [{ limit: 5, period: '1h' }], by: ['org'], parent: 'global' },
        global: { windows: [{ limit: 7, period: '1h' }], by: [] },
      },
    })
    const reasons: string[] = []
    for (let i = 0; i < 4; i++) reasons.push((await limiter.consume('user', ['user:a', 'org:acme'])).reason)
    expect(reasons).toEqual(['ok', 'ok', 'ok', 'blocked'])
    const b = []
    for (let i = 0; i < 3; i++) b.push((await limiter.consume('user', ['user:b', 'org:acme'])).reason)
    expect(b).toEqual(['ok', 'ok', 'limited'])
    const reservation = await limiter.reserve('user', ['user:c', 'org:beta'], { cost: 1 })
    await reservation.settle(3)
    const peek = await limiter.peek('user', ['user:c', 'org:beta'], { cost: 0 })
    expect(peek.windows.map((w) => [w.rule, w.identifier, w.remaining])).toEqual([
      ['user', 'user:c', 0],
      ['org', 'org:beta', 2],
      ['global', '*', 0],
    ])
    // Every key a decision wrote, block keys among them, with a TTL, on whichever master holds it.
    const keys = (
      await Promise.all(
        cluster.nodes.map(async (node) => {
          const direct = new RedisClient(node.url)
          const found = await keysWithTtl(direct, 'levels:')
          direct.disconnect()
          return found
        }),
      )
    ).flat()
    expect(keys.some(({ key }) => key.endsWith(':block'))).toBe(true)
    for (const { ttlMs } of keys) expect(ttlMs).toBeGreaterThan(0)
  })
})

describe('RedisStore through Sentinel', () => {
  let sentinel: SpawnedSentinel
  let client: Redis
  beforeAll(async () => {
    sentinel = await spawnRedisSentinel()
    client = sentinelClient(sentinel)
  }, 60_000)
  afterAll(async () => {
    client?.disconnect()
    await sentinel?.stop()
  })

  it('decides on the master the sentinels name', async () => {
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'sentinel:' }), rules: { login } })
    const decisions = []
    for (let i = 0; i < 6; i++) decisions.push((await limiter.consume('login', ['ip:203.0.113.7', 'user:42'])).allowed)
    expect(decisions).toEqual([true, true, true, true, true, false])
    const master = new RedisClient(sentinel.master.url)
    expect((await keysWithTtl(master, 'sentinel:')).length).toBe(2)
    master.disconnect()
  })
})
