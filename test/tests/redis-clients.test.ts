// The stores and live rules take a client of either library, told apart by the object given:
// ioredis and its fork iovalkey, and node-redis from v4 to v6. The same Lua and keys run whatever
// the client, so processes on different clients share counters and rules. The rest of the suite
// runs on ioredis 5; @tollgate/core's peer range takes 6 as well, which a fresh install resolves,
// and which speaks RESP3, as node-redis does when asked: that changes how script replies and
// errors come back.
import {
  createLimiter,
  type Decision,
  HybridStore,
  LiveRules,
  type LiveRulesOptions,
  MemoryStore,
  RedisStore,
  type RulesOptions,
  readFleetProcesses,
  readFleetSeconds,
  shareFleetStats,
  TollgateConfigError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { Cluster as Cluster6, Redis as Redis6 } from 'ioredis6'
import { Redis as Valkey } from 'iovalkey'
import { createClient as createClient6, createCluster as createCluster6 } from 'redis'
import { createClient as createClient4 } from 'redis4'
import {
  createClient as createClient5,
  createCluster as createCluster5,
  createSentinel as createSentinel5,
} from 'redis5'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { pollUntil } from '../src/poll.js'
import { spawnRedisCluster, waitReady } from '../src/redis-cluster.js'
import { keysWithTtl, keyValues } from '../src/redis-keys.js'
import { spawnRedisSentinel } from '../src/redis-sentinel.js'
import { runStoreConformance } from '../src/store-conformance.js'

/** A connected client of one library, and how to close it. */
interface Library {
  readonly name: string
  connect(url: string): Promise<{ client: LiveRulesOptions['client']; close(): Promise<void> }>
}

const LIBRARIES: Library[] = [
  {
    name: 'ioredis 6',
    async connect(url) {
      const client = new Redis6(url)
      return { client, close: async () => void (await client.quit()) }
    },
  },
  {
    name: 'iovalkey',
    async connect(url) {
      const client = new Valkey(url)
      return { client, close: async () => void (await client.quit()) }
    },
  },
  {
    name: 'node-redis 4',
    async connect(url) {
      const client = createClient4({ url })
      await client.connect()
      return { client, close: async () => void (await client.quit()) }
    },
  },
  {
    name: 'node-redis 5',
    async connect(url) {
      const client = createClient5({ url })
      await client.connect()
      return { client, close: () => client.close() }
    },
  },
  {
    // RESP3, which node-redis 5 speaks when asked: replies come back as ioredis 6's do.
    name: 'node-redis 5 on RESP3',
    async connect(url) {
      const client = createClient5({ url, RESP: 3 })
      await client.connect()
      return { client, close: () => client.close() }
    },
  },
  {
    name: 'node-redis 6',
    async connect(url) {
      const client = createClient6({ url })
      await client.connect()
      return { client, close: () => client.close() }
    },
  },
]

let prefixes = 0
const prefixOf = (what: string) => `clients:${process.pid}:${prefixes++}:${what}:`
const remaining = (decision: Decision) => decision.windows.map((window) => window.remaining)

for (const library of LIBRARIES) {
  runStoreConformance(`RedisStore on ${library.name}`, async () => {
    const { client, close } = await library.connect(inject('redisUrl'))
    const observer = new Redis(inject('redisUrl'))
    let prefix = ''
    return {
      makeStore(clock) {
        prefix = prefixOf('conformance')
        return new RedisStore({ client, clock, prefix })
      },
      keys: () => keysWithTtl(observer, prefix),
      snapshot: () => keyValues(observer, prefix),
      close: async () => {
        await close()
        await observer.quit()
      },
    }
  })

  describe(`${library.name} beside ioredis`, () => {
    let other: Awaited<ReturnType<Library['connect']>>
    let ioredis: Redis
    beforeAll(async () => {
      other = await library.connect(inject('redisUrl'))
      ioredis = new Redis(inject('redisUrl'))
    })
    afterAll(async () => {
      await other.close()
      await ioredis.quit()
    })

    const rules: RulesOptions = { api: { algorithm: 'fixed-window', windows: [{ limit: 4, period: '1m' }] } }

    it('shares one RedisStore counter with a process on ioredis', async () => {
      const prefix = prefixOf('shared')
      const limiters = [other.client, ioredis].map((client) =>
        createLimiter({ rules, store: new RedisStore({ client, prefix }) }),
      )
      const reasons = []
      for (let i = 0; i < 6; i++) reasons.push((await limiters[i % 2]!.consume('api', 'ip:1')).reason)
      expect(reasons).toEqual(['ok', 'ok', 'ok', 'ok', 'limited', 'limited'])
      await Promise.all(limiters.map((limiter) => limiter.close()))
    })

    it("syncs a HybridStore's units into the counter a RedisStore on ioredis decides on", async () => {
      const prefix = prefixOf('hybrid')
      const hybrid = new HybridStore({ client: other.client, prefix, autoSync: false })
      const local = createLimiter({ rules, store: hybrid })
      const remote = createLimiter({ rules, store: new RedisStore({ client: ioredis, prefix }) })
      for (let i = 0; i < 3; i++) expect((await local.consume('api', 'ip:1')).reason).toBe('ok')
      const report = await hybrid.syncNow()
      expect(report.error).toBeUndefined()
      expect(remaining(await remote.peek('api', 'ip:1'))).toEqual([1])
      await Promise.all([local.close(), remote.close()])
    })

    it('admits exactly the limit between a strict HybridStore on it and a RedisStore on ioredis', async () => {
      const prefix = prefixOf('strict')
      const strict = createLimiter({
        rules,
        store: new HybridStore({ client: other.client, prefix, autoSync: false, consistency: 'strict' }),
      })
      const remote = createLimiter({ rules, store: new RedisStore({ client: ioredis, prefix, refusalCache: false }) })
      const allowed = []
      for (let i = 0; i < 10; i++) allowed.push((await (i % 2 ? remote : strict).consume('api', 'ip:1')).allowed)
      expect(allowed.filter(Boolean)).toHaveLength(4)
      await Promise.all([strict.close(), remote.close()])
    })

    it('hears a publish made on ioredis through its own subscription, and reads it', async () => {
      const prefix = prefixOf('live')
      const defaults: RulesOptions = { api: { windows: [{ limit: 10, period: '1m' }] } }
      const follower = new LiveRules({ client: other.client, defaults, prefix, pollIntervalMs: 0 })
      const publisher = new LiveRules({ client: ioredis, defaults, prefix, pollIntervalMs: 0, nudges: false })
      const limiter = createLimiter({ rules: follower, store: new RedisStore({ client: other.client, prefix }) })
      await follower.refresh()
      await pollUntil('the follower subscribed', 10_000, async () => {
        const [, count] = (await ioredis.pubsub('NUMSUB', `${prefix}{rules}:nudge`)) as [string, number]
        return count === 1 ? { done: true, value: count } : { done: false, state: `${count} subscribers` }
      })
      await publisher.publish({ api: { windows: [{ limit: 25, period: '1m' }] } })
      // Neither process polls: only the nudge can bring the publish.
      await pollUntil('the follower applied the publish', 10_000, async () =>
        follower.epoch === 1 ? { done: true, value: 1 } : { done: false, state: `epoch ${follower.epoch}` },
      )
      expect((await limiter.consume('api', 'ip:1')).windows[0]?.limit).toBe(25)
      expect((await follower.history()).length).toBe(1)
      await Promise.all([limiter.close(), follower.close(), publisher.close()])
      // The rules' keys have no TTL: they are configuration.
      await ioredis.del(...(await ioredis.keys(`${prefix}{rules}:*`)))
    })

    it('loads its scripts again after SCRIPT FLUSH', async () => {
      const limiter = createLimiter({
        rules,
        store: new RedisStore({ client: other.client, prefix: prefixOf('flush') }),
      })
      expect((await limiter.consume('api', 'ip:1')).reason).toBe('ok')
      await ioredis.script('FLUSH')
      const decision = await limiter.consume('api', 'ip:1')
      expect(decision.reason).toBe('ok')
      expect(remaining(decision)).toEqual([2])
      await limiter.close()
    })

    it("fails a decision over a key of the wrong type alone, with Redis's own words", async () => {
      const store = new RedisStore({ client: other.client, prefix: prefixOf('wrongtype') })
      const limiter = createLimiter({ store, rules: { r: { windows: [{ limit: 5, period: '1m' }] } } })
      const rule = limiter.rules.get('r')!.stateName
      await ioredis.set(store.keyOf({ rule, algorithm: 'sliding-log', windows: [], identifier: 'ip:a' }), 'x', 'EX', 60)
      const [broken, fine] = await Promise.all([limiter.consume('r', 'ip:a'), limiter.consume('r', 'ip:b')])
      expect(broken).toMatchObject({ allowed: true, reason: 'store-error-allowed' })
      expect(broken.error?.message).toMatch(/WRONGTYPE/)
      expect(fine).toMatchObject({ allowed: true, reason: 'ok' })
      expect(limiter.breakerState).toBe('closed')
      await limiter.close()
    })
  })
}

describe('node-redis clients', () => {
  it('are closed by the store that was given them with closeClient', async () => {
    const client = createClient5({ url: inject('redisUrl') })
    await client.connect()
    const limiter = createLimiter({
      rules: { api: { windows: [{ limit: 1, period: '1m' }] } },
      store: new RedisStore({ client, prefix: prefixOf('close'), closeClient: true }),
    })
    await limiter.consume('api', 'ip:1')
    await limiter.close()
    expect(client.isOpen).toBe(false)
  })

  it('not connected yet: each decision fails under the store-error policy, saying to connect', async () => {
    const client = createClient5({ url: inject('redisUrl') })
    const limiter = createLimiter({
      rules: { api: { windows: [{ limit: 1, period: '1m' }] } },
      store: new RedisStore({ client, prefix: prefixOf('unopened') }),
      onStoreError: 'deny',
    })
    const decision = await limiter.consume('api', 'ip:1')
    expect(decision).toMatchObject({ allowed: false, reason: 'store-error-denied' })
    expect(decision.error?.message).toMatch(/node-redis client is not open: connect it \(await client.connect\(\)\)/)
    await limiter.close()
  })

  it('bring live rules up to date when they connect again, as after a failover', async () => {
    const name = `reconnecting-${process.pid}`
    const client = createClient5({ url: inject('redisUrl'), name })
    // node-redis emits the lost connection as an error, then connects again by itself.
    client.on('error', () => {})
    await client.connect()
    const admin = new Redis(inject('redisUrl'))
    const prefix = prefixOf('reconnect')
    const defaults: RulesOptions = { api: { windows: [{ limit: 10, period: '1m' }] } }
    // Neither polls nor hears nudges: only a reconnection makes the follower read.
    const follower = new LiveRules({ client, defaults, prefix, pollIntervalMs: 0, nudges: false })
    const publisher = new LiveRules({ client: admin, defaults, prefix, pollIntervalMs: 0, nudges: false })
    const limiter = createLimiter({ rules: follower, store: new RedisStore({ client, prefix }) })
    await follower.refresh()
    await publisher.publish({ api: { windows: [{ limit: 30, period: '1m' }] } })
    expect(follower.epoch).toBe(0)
    const clients = String(await admin.client('LIST'))
    const id = /id=(\d+) [^\n]*name=(\S+)/g
    let killed = 0
    for (const [, found, named] of clients.matchAll(id)) {
      if (named === name) killed += Number(await admin.client('KILL', 'ID', found as string))
    }
    expect(killed).toBe(1)
    await pollUntil('the follower read the publish once connected again', 10_000, async () =>
      follower.epoch === 1 ? { done: true, value: 1 } : { done: false, state: `epoch ${follower.epoch}` },
    )
    expect((await limiter.consume('api', 'ip:1')).windows[0]?.limit).toBe(30)
    await Promise.all([limiter.close(), follower.close(), publisher.close()])
    await admin.del(...(await admin.keys(`${prefix}{rules}:*`)))
    await admin.quit()
    await client.close()
  })

  it("write fleet stats that tollgate top's readers, on ioredis, read back", async () => {
    const client = createClient5({ url: inject('redisUrl') })
    await client.connect()
    const reader = new Redis(inject('redisUrl'))
    const prefix = prefixOf('fleet')
    const T = 1_700_000_000_000
    const limiter = createLimiter({
      rules: { api: { windows: [{ limit: 2, period: '1m' }] } },
      store: new MemoryStore({ clock: () => T }),
    })
    const stats = shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000, clock: () => T })
    for (let i = 0; i < 5; i++) await limiter.consume('api', 'ip:1')
    await stats.flush()
    const [second] = await readFleetSeconds(reader, prefix, T / 1000, T / 1000)
    expect(second?.rules.api?.decisions).toEqual({ allowed: 2, limited: 3 })
    expect((await readFleetProcesses(reader, prefix, { nowMs: T })).length).toBe(1)
    await stats.close()
    await limiter.close()
    await reader.quit()
    await client.close()
  })

  it('are refused with the option named when they are not clients at all', () => {
    expect(() => new RedisStore({ client: { sendCommand: async () => null } as never })).toThrow(TollgateConfigError)
    expect(() => new RedisStore({ client: { sendCommand: async () => null } as never })).toThrow(
      /^RedisStore option client must be an ioredis \(or iovalkey\) Redis or Cluster client, or a node-redis client/,
    )
  })
})

describe('Cluster clients', () => {
  let cluster: Awaited<ReturnType<typeof spawnRedisCluster>>
  beforeAll(async () => {
    cluster = await spawnRedisCluster()
  }, 60_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  const rootNodes = () => cluster.startupNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
  const clusters: Array<[string, () => Promise<{ client: LiveRulesOptions['client']; close(): Promise<void> }>]> = [
    [
      'ioredis 6',
      async () => {
        const client = new Cluster6(cluster.startupNodes, { enableReadyCheck: true })
        await waitReady(client as unknown as Parameters<typeof waitReady>[0])
        return { client, close: async () => void (await client.quit()) }
      },
    ],
    [
      'node-redis 5',
      async () => {
        const client = createCluster5({ rootNodes: rootNodes() })
        await client.connect()
        return { client, close: () => client.close() }
      },
    ],
    [
      'node-redis 6',
      async () => {
        const client = createCluster6({ rootNodes: rootNodes() })
        await client.connect()
        return { client, close: () => client.close() }
      },
    ],
  ]
  for (const [name, connect] of clusters) {
    it(`${name}: decides two identifiers in two slots exactly, and a HybridStore syncs across masters`, async () => {
      const { client, close } = await connect()
      const rules: RulesOptions = { r: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '1m' }] } }
      const prefix = prefixOf('cluster')
      // A bound that a loaded machine cannot reach: a timeout would read as a pass.
      const limiter = createLimiter({ rules, store: new RedisStore({ client, prefix }), storeTimeoutMs: 10_000 })
      const decisions = []
      for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('r', ['ip:203.0.113.7', 'user:42']))
      expect(decisions.map((d) => d.reason)).toEqual(['ok', 'ok', 'ok', 'limited'])
      expect(decisions[3]?.windows.map((w) => w.remaining)).toEqual([0, 0])

      const hybrid = new HybridStore({ client, prefix, autoSync: false })
      const local = createLimiter({ rules, store: hybrid })
      const identifiers = Array.from({ length: 20 }, (_, i) => `user:${i}`)
      for (const identifier of identifiers) await local.consume('r', identifier)
      const report = await hybrid.syncNow()
      expect(report.error).toBeUndefined()
      for (const identifier of identifiers) expect(remaining(await limiter.peek('r', identifier))).toEqual([2])
      await Promise.all([limiter.close(), local.close()])
      await close()
    })
  }
})

describe('node-redis Sentinel clients', () => {
  let sentinel: Awaited<ReturnType<typeof spawnRedisSentinel>>
  beforeAll(async () => {
    sentinel = await spawnRedisSentinel({ sentinels: 1 })
  }, 60_000)
  afterAll(async () => {
    await sentinel?.stop()
  })

  it('node-redis 5: decides on the master the sentinels name, and polls live rules, having no subscription', async () => {
    const client = createSentinel5({ name: sentinel.masterName, sentinelRootNodes: sentinel.sentinelNodes })
    await client.connect()
    const prefix = prefixOf('sentinel')
    const defaults: RulesOptions = { r: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '1m' }] } }
    expect(() => new LiveRules({ client, defaults, prefix })).toThrow(
      /^LiveRules option nudges needs a client with duplicate\(\) to subscribe on/,
    )
    const rules = new LiveRules({ client, defaults, prefix, nudges: false, pollIntervalMs: 0 })
    await rules.publish({ r: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '1m' }] } })
    const limiter = createLimiter({ rules, store: new RedisStore({ client, prefix }), storeTimeoutMs: 10_000 })
    const reasons = []
    for (let i = 0; i < 4; i++) reasons.push((await limiter.consume('r', 'ip:1')).reason)
    expect(reasons).toEqual(['ok', 'ok', 'ok', 'limited'])
    const onMaster = new Redis(sentinel.master.url)
    const keys = await keysWithTtl(onMaster, prefix)
    expect(keys.filter(({ key }) => !key.includes('{rules}')).map(({ ttlMs }) => ttlMs > 0)).toEqual([true])
    await Promise.all([limiter.close(), rules.close()])
    await onMaster.del(...(await onMaster.keys(`${prefix}{rules}:*`)))
    await onMaster.quit()
    await client.close()
  })
})
