import { createLimiter, HybridStore, type Limiter, RedisStore, type RulesOptions } from '@tollgate/core'
import calculateSlot from 'cluster-key-slot'
import { type Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { syncScript } from '../../packages/core/src/scripts/generated.js'
import { ManualClock } from '../src/manual-clock.js'
import {
  clusterClient,
  clusterMasters,
  masterOfSlot,
  migrateSlot,
  type SpawnedCluster,
  spawnRedisCluster,
  waitReady,
} from '../src/redis-cluster.js'
import { addable } from '../src/redis-codec.js'
import { keysWithTtl } from '../src/redis-keys.js'
import type { SpawnedRedis } from '../src/redis-server.js'
import { scriptCalls } from '../src/script-calls.js'
import { holdsNoState } from '../src/store-conformance.js'

const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 60_000)
const rules = {
  api: {
    algorithm: 'sliding-window',
    windows: [
      { limit: 1000, period: '1m' },
      { limit: 200, period: '3s' },
    ],
  },
} satisfies RulesOptions

describe('HybridStore on a Redis Cluster', () => {
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

  /**
   * A process deciding on `count` users under a fixed window of an hour, through a client of its
   * own that learns the Cluster's map only from Redis's redirections; `used` reads each user's
   * units in Redis, through a RedisStore on the shared client.
   */
  async function runningProcess(prefix: string, count: number) {
    const own = clusterClient(cluster, { slotsRefreshInterval: 0 })
    await waitReady(own)
    const clock = new ManualClock(T0)
    const hour = {
      f: { algorithm: 'fixed-window', windows: [{ limit: 1_000_000, period: '1h' }] },
    } satisfies RulesOptions
    const store = new HybridStore({ client: own, clock: clock.now, autoSync: false, prefix })
    const limiter = createLimiter({ store, rules: hour, onWarning: () => {} })
    const redis = createLimiter({ store: new RedisStore({ client, clock: clock.now, prefix }), rules: hour })
    const users = Array.from({ length: count }, (_, i) => `user:${i}`)
    return {
      store,
      clock,
      users,
      round: async (cost: number) => {
        for (const user of users) expect((await limiter.consume('f', user, { cost })).allowed).toBe(true)
      },
      used: async () => {
        const units: number[] = []
        for (const user of users) units.push(1_000_000 - ((await redis.peek('f', user)).windows[0]?.remaining ?? 0))
        return units
      },
      close: async () => {
        await Promise.all([limiter.close(), redis.close()])
        own.disconnect()
      },
    }
  }

  /** The users' state keys under `prefix` on each master (not the heartbeat's, nor the pushes' operation keys). */
  async function stateKeys(prefix: string): Promise<Array<{ key: string; slot: number; master: SpawnedRedis }>> {
    const keys: Array<{ key: string; slot: number; master: SpawnedRedis }> = []
    for (const master of await clusterMasters(cluster)) {
      const node = new Redis(master.url)
      for (const { key } of await keysWithTtl(node, prefix))
        if (key.includes('{user:') && !holdsNoState(key)) keys.push({ key, slot: calculateSlot(key), master })
      node.disconnect()
    }
    return keys
  }

  /**
   * A key that is not in its master's lowest slot: the master's call names the lowest slot's keys,
   * which Redis routes the call by, and carries this one after them. (A call whose own slot moved
   * is redirected whole to the new master, where its other slots answer as not its.)
   */
  function aboveLowestSlot(keys: ReadonlyArray<{ key: string; slot: number; master: SpawnedRedis }>) {
    const lowest = (port: number) => Math.min(...keys.filter((k) => k.master.port === port).map((k) => k.slot))
    const found = keys.find((k) => k.slot > lowest(k.master.port))
    if (found === undefined) throw new Error("no key above its master's lowest slot")
    return found
  }

  it("syncs keys of every slot, a master's keys a call, and RedisStore on the Cluster reads the totals", async () => {
    const clock = new ManualClock(T0)
    const stores = [0, 1].map(() => new HybridStore({ client, clock: clock.now, autoSync: false, prefix: 'hc:' }))
    const limiters: Limiter[] = stores.map((store) => createLimiter({ store, rules, onWarning: () => {} }))
    const users = Array.from({ length: 60 }, (_, i) => `user:${i}`)
    // Each decision charges an address and a user, whose keys mostly lie in different slots.
    for (const [i, limiter] of limiters.entries()) {
      for (const user of users) {
        expect((await limiter.consume('api', ['ip:10.0.0.1', user], { cost: 1 + i })).allowed).toBe(true)
      }
    }
    for (const store of stores) {
      const calls = await clusterScriptCalls(cluster)
      const report = await store.syncNow()
      expect(report.error).toBeUndefined()
      expect(report.keys).toBe(users.length + 1)
      // 61 keys in about as many slots: one call per master, and the heartbeat's.
      expect((await clusterScriptCalls(cluster)) - calls).toBe(3 + 1)
    }
    const redis = createLimiter({ store: new RedisStore({ client, clock: clock.now, prefix: 'hc:' }), rules })
    for (const user of users) {
      expect((await redis.peek('api', user)).windows.map((w) => w.remaining)).toEqual([1000 - 3, 200 - 3])
    }
    // The address took 60 units through one store and 120 through the other.
    expect((await redis.peek('api', 'ip:10.0.0.1')).windows.map((w) => w.remaining)).toEqual([820, 20])
    // The first store alone used 60 of the 3 s window's 200. A sync pulls the keys decided on
    // since the last one: after a peek and a sync it knows the fleet's 180.
    expect((await limiters[0]?.peek('api', 'ip:10.0.0.1'))?.windows[1]?.remaining).toBe(140)
    await stores[0]?.syncNow()
    const refused = await limiters[0]?.consume('api', ['ip:10.0.0.1', 'user:0'], { cost: 21 })
    expect(refused).toMatchObject({ allowed: false, reason: 'limited' })
    // Every key on every master expires, and the keys are spread over all three.
    let held = 0
    for (const master of await clusterMasters(cluster)) {
      const node = new Redis(master.url)
      // Without the pushes' operation keys, which hold no state (lua/lib/operation.lua).
      const keys = (await keysWithTtl(node, 'hc:')).filter(({ key }) => !holdsNoState(key))
      node.disconnect()
      expect(keys.filter((k) => k.ttlMs < 0)).toEqual([])
      expect(keys.length).toBeGreaterThan(0)
      held += keys.length
    }
    expect(held).toBe(users.length + 2)
    await Promise.all([...limiters, redis].map((l) => l.close()))
  }, 60_000)

  it("a slot moved under a running process: the call that meets it writes nothing of that slot's keys, the next sync goes slot by slot, and every unit counts once", async () => {
    const { store, users, round, used, close } = await runningProcess('hm:', 300)
    await round(1)
    expect((await store.syncNow()).error).toBeUndefined()
    const keys = await stateKeys('hm:')
    expect(keys.length).toBe(users.length)
    const { slot, master: from } = aboveLowestSlot(keys)
    const to = (await clusterMasters(cluster)).find((master) => master.port !== from.port) as SpawnedRedis
    await migrateSlot(cluster, slot, from, to)
    try {
      await round(2)
      const calls = await clusterScriptCalls(cluster)
      const moved = await store.syncNow()
      // The stale map is no failure: the call to the old master wrote nothing of the moved
      // slot's keys and says so.
      expect(moved.error).toBeUndefined()
      expect((await clusterScriptCalls(cluster)) - calls).toBe(3 + 1)
      // Keys of the moved slot took nothing at that sync; the others, the old master's too, took
      // their 2 more.
      const slotOf = (user: string) => keys.find(({ key }) => key.includes(`{${user}}`))?.slot
      const inMoved = users.map((user) => slotOf(user) === slot)
      expect(inMoved.filter(Boolean).length).toBeGreaterThan(0)
      expect(await used()).toEqual(inMoved.map((stale) => (stale ? 1 : 3)))
      // Slot by slot, Redis's redirections route each call: every key then holds its 3 units.
      expect((await store.syncNow()).error).toBeUndefined()
      expect(await used()).toEqual(users.map(() => 3))
      // And the map learned, a sync goes by master again.
      await round(1)
      const before = await clusterScriptCalls(cluster)
      expect((await store.syncNow()).error).toBeUndefined()
      expect((await clusterScriptCalls(cluster)) - before).toBe(3 + 1)
      expect(await used()).toEqual(users.map(() => 4))
    } finally {
      await close()
      await migrateSlot(cluster, slot, to, from)
    }
  }, 60_000)

  it('a slot half migrated under a running process: its moved key waits, refused while the slot migrates, and counts its units once after', async () => {
    const { store, clock, users, round, used, close } = await runningProcess('hh:', 60)
    await round(1)
    expect((await store.syncNow()).error).toBeUndefined()
    const { key: moving, slot, master: from } = aboveLowestSlot(await stateKeys('hh:'))
    const isMoving = (user: string) => moving.includes(`{${user}}`)
    const to = (await clusterMasters(cluster)).find((master) => master.port !== from.port) as SpawnedRedis
    const [source, destination] = [new Redis(from.url), new Redis(to.url)]
    await destination.cluster('SETSLOT', slot, 'IMPORTING', (await source.cluster('MYID')) as string)
    await source.cluster('SETSLOT', slot, 'MIGRATING', (await destination.cluster('MYID')) as string)
    await source.migrate('127.0.0.1', to.port, moving, 0, 5_000)
    let migrated = false
    try {
      await round(2)
      // The call that holds the moved key syncs every other key, its master's too, not that one.
      expect((await store.syncNow()).error).toBeUndefined()
      expect(await used()).toEqual(users.map((name) => (isMoving(name) ? 1 : 3)))
      // Sent alone to its slot, with the call's operation key, new to Redis: the old node sends
      // the call on (ASK), and the node importing the slot refuses a call naming a key it does not
      // hold yet beside another (TRYAGAIN), until the client gives up. The push is kept, its units
      // neither lost nor counted, until the slot has moved.
      const refused = await store.syncNow()
      expect(refused.error?.message).toMatch(/Too many Cluster redirections/)
      expect(await used()).toEqual(users.map((name) => (isMoving(name) ? 1 : 3)))
      // A node that redirects is a node that answers: a migration that outlasts outage.afterMs
      // does not send its keys' decisions to the outage policy.
      clock.advance(10_000)
      expect((await store.syncNow()).error?.message).toMatch(/Too many Cluster redirections/)
      expect(store.stats().mode).toBe('synced')
      await migrateSlot(cluster, slot, from, to)
      migrated = true
      // Once the slot has moved, the push goes again as it was: every key holds its 3 units, once.
      expect((await store.syncNow()).error).toBeUndefined()
      expect(await used()).toEqual(users.map(() => 3))
      await round(1)
      expect((await store.syncNow()).error).toBeUndefined()
      expect(await used()).toEqual(users.map(() => 4))
    } finally {
      await close()
      source.disconnect()
      destination.disconnect()
      if (!migrated) await migrateSlot(cluster, slot, from, to)
      await migrateSlot(cluster, slot, to, from)
    }
  }, 60_000)

  it("the sync script writes nothing of a key its node does not serve, answers '?' for it, and answers the same when sent again", async () => {
    const masters = await clusterMasters(cluster)
    const owners = new Map<number, number>()
    const ownerOf = async (key: string) => {
      const slot = calculateSlot(key)
      if (!owners.has(slot)) owners.set(slot, (await masterOfSlot(cluster, slot)).port)
      return owners.get(slot) as number
    }
    // Two keys of one master in two slots, and one of another master.
    const candidates = Array.from({ length: 64 }, (_, i) => `hx:r:{k${i}}:fw`)
    const first = candidates[0] as string
    const home = await ownerOf(first)
    let sameNode: string | undefined
    let otherNode: string | undefined
    for (const key of candidates.slice(1)) {
      const port = await ownerOf(key)
      if (port === home && calculateSlot(key) !== calculateSlot(first)) sameNode ??= key
      if (port !== home) otherNode ??= key
    }
    if (!sameNode || !otherNode) throw new Error('no keys on the masters wanted')
    const node = new Redis((masters.find((master) => master.port === home) as { url: string }).url)
    const operation = 'hx:op:{k0}'
    const now = T0 + 1_000
    const sync = (stranger: string) => syncTwoSlots(node, now, [stranger], [2, now, 1])
    try {
      // Both slots this node's: both keys written.
      expect(await sync(sameNode)).toEqual([addable(T0 + 60_000, 1), addable(T0 + 60_000, 1)])
      await node.del(operation, first)
      await node.del(sameNode)
      // A slot of another master: that key's units not pushed, the other key's pushed; the
      // operation's key notes which it did not push.
      expect(await sync(otherNode)).toEqual([addable(T0 + 60_000, 1), '?'])
      expect(await node.get(operation)).toBe('unpushed 2')
      // Sent again after a lost reply: the same answer, and nothing pushed twice.
      expect(await sync(otherNode)).toEqual([addable(T0 + 60_000, 1), '?'])
      expect(await node.get(first)).toBe(addable(T0 + 60_000, 1))
      // A call that pushed both keys, sent again once the second's slot is not this node's: its
      // units are in Redis, only its value is not known here.
      await node.set(operation, '1')
      expect(await sync(otherNode)).toEqual([addable(T0 + 60_000, 1), '~'])
      expect(await node.get(first)).toBe(addable(T0 + 60_000, 1))
    } finally {
      await node.del(operation, first)
      await node.del(sameNode)
      node.disconnect()
    }
  })

  it("a slot being migrated: a key still here is synced; one moved, or whose side key moved, writes nothing and answers '?'", async () => {
    const masters = await clusterMasters(cluster)
    const first = 'hx:r:{k0}:fw'
    const operation = 'hx:op:{k0}'
    const home = await masterOfSlot(cluster, calculateSlot(first))
    // Keys of one slot on `first`'s master, another slot than its own: some stay, one moves.
    let tag: string | undefined
    for (let i = 0; i < 256 && tag === undefined; i++) {
      const slot = calculateSlot(`m${i}`)
      if (slot !== calculateSlot('k0') && (await masterOfSlot(cluster, slot)).port === home.port) tag = `m${i}`
    }
    if (tag === undefined) throw new Error('no second slot on the master')
    const [staying, moving, sided] = [`hx:r:{${tag}}:a`, `hx:r:{${tag}}:b`, `hx:r:{${tag}}:c`]
    const slot = calculateSlot(staying)
    const target = masters.find((master) => master.port !== home.port) as (typeof masters)[number]
    const source = new Redis(home.url)
    const destination = new Redis(target.url)
    const now = T0 + 1_000
    const before = addable(T0 + 60_000, 4)
    // `sided` counts the window after the one its segment falls in: that segment goes to its
    // side key, `sided:prev`, which is read before either is written.
    const sidedBefore = addable(T0 + 120_000, 4)
    const sync = (names: string[], entries: unknown[]) => syncTwoSlots(source, now, names, entries)
    try {
      await source.set(staying, before, 'PX', 60_000)
      await source.set(moving, before, 'PX', 60_000)
      await source.set(sided, sidedBefore, 'PX', 120_000)
      await source.set(`${sided}:prev`, before, 'PX', 60_000)
      const [sourceId, targetId] = [await source.cluster('MYID'), await destination.cluster('MYID')]
      await destination.cluster('SETSLOT', slot, 'IMPORTING', sourceId as string)
      await source.cluster('SETSLOT', slot, 'MIGRATING', targetId as string)
      await source.migrate('127.0.0.1', target.port, moving, 0, 5_000)
      await source.migrate('127.0.0.1', target.port, `${sided}:prev`, 0, 5_000)
      expect(await sync([staying, moving], [2, now, 1, 2, now, 1])).toEqual([
        addable(T0 + 60_000, 1),
        addable(T0 + 60_000, 5),
        '?',
      ])
      expect(await source.get(operation)).toBe('unpushed 3')
      await source.del(operation)
      expect(await sync([sided], [2, now - 60_000, 1])).toEqual([addable(T0 + 60_000, 2), '?'])
      // Nothing of the keys that answered '?' written, here or where they moved.
      expect(await source.get(sided)).toBe(sidedBefore)
      await destination.call('ASKING')
      expect(await destination.get(moving)).toBe(before)
      await destination.call('ASKING')
      expect(await destination.get(`${sided}:prev`)).toBe(before)
    } finally {
      await source.del(first, operation)
      await source.del(staying, sided)
      // The moved keys, deleted on the node importing their slot, which takes them when asked so.
      await destination.call('ASKING')
      await destination.del(moving)
      await destination.call('ASKING')
      await destination.del(`${sided}:prev`)
      await source.cluster('SETSLOT', slot, 'STABLE')
      await destination.cluster('SETSLOT', slot, 'STABLE')
      source.disconnect()
      destination.disconnect()
    }
  })

  it('strict mode: decisions over two slots never pass a limit, a refusal charges no slot, and close gives every slice back', async () => {
    const clock = new ManualClock(T0)
    const strictRules = {
      r: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1m' }] },
    } satisfies RulesOptions
    const stores = [0, 1].map(
      () => new HybridStore({ client, clock: clock.now, autoSync: false, prefix: 'hs:', consistency: 'strict' }),
    )
    const limiters: Limiter[] = stores.map((store) => createLimiter({ store, rules: strictRules, onWarning: () => {} }))
    // The address is shared; each user is new: their keys lie in other slots than the address's.
    let admitted = 0
    for (let i = 0; i < 30; i++) {
      const decision = await (limiters[i % 2] as Limiter).consume('r', ['ip:10.0.0.9', `user:${i}`])
      if (decision.allowed) admitted++
    }
    expect(admitted).toBe(10)
    await Promise.all(limiters.map((limiter) => limiter.close()))
    const redis = createLimiter({
      store: new RedisStore({ client, clock: clock.now, prefix: 'hs:' }),
      rules: strictRules,
    })
    expect((await redis.peek('r', 'ip:10.0.0.9')).windows[0]?.remaining).toBe(0)
    // Users refused by the address were charged nothing, those admitted one each.
    const remaining = []
    for (let i = 0; i < 30; i++) remaining.push((await redis.peek('r', `user:${i}`)).windows[0]?.remaining)
    expect(remaining.filter((units) => units === 9)).toHaveLength(10)
    expect(remaining.filter((units) => units === 10)).toHaveLength(20)
    await redis.close()
  }, 60_000)
  // One master down once sent every key to the outage policy: 'local-share' granted each process
  // ⌈L ÷ N⌉ afresh even on keys whose master answered and whose window was full (4,757 admitted
  // against 2,000 during a 2 s failover).
  it.each(['approximate', 'strict'] as const)(
    '%s: a master that stops answering sends only its own keys to the outage policy',
    async (consistency) => {
      const clock = new ManualClock(T0)
      const prefix = `hn-${consistency}:`
      const fixed = { r: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } } satisfies RulesOptions
      const redis = createLimiter({ store: new RedisStore({ client, clock: clock.now, prefix }), rules: fixed })
      const store = new HybridStore({
        client,
        clock: clock.now,
        autoSync: false,
        prefix,
        consistency,
        syncTimeoutMs: 500,
        outage: { policy: 'local-share', afterMs: 1_000 },
        onWarning: () => {},
      })
      const hybrid = createLimiter({ store, rules: fixed, onWarning: () => {} })
      const masterOf = async (identifier: string) =>
        (
          await masterOfSlot(
            cluster,
            calculateSlot(store.keyOf({ rule: 'r', algorithm: 'fixed-window', windows: [], identifier })),
          )
        ).port
      const stopped = await masterOf('user:0')
      let healthy = 'user:1'
      for (let i = 1; (await masterOf(healthy)) === stopped; i++) healthy = `user:${i}`
      // A key of the silent master the process never decided: no slice covers it in strict mode.
      let unseen = 'user:new-1'
      for (let i = 1; (await masterOf(unseen)) !== stopped; i++) unseen = `user:new-${i}`
      const down = (await clusterMasters(cluster)).find((master) => master.port === stopped)
      // The healthy key's window is full in Redis; the process knows it after a sync.
      for (let i = 0; i < 20; i++) await redis.consume('r', healthy)
      await hybrid.peek('r', healthy)
      await hybrid.consume('r', 'user:0')
      expect((await store.syncNow()).error).toBeUndefined()
      down?.kill('SIGSTOP')
      try {
        await hybrid.consume('r', 'user:0').catch(() => undefined)
        expect((await store.syncNow()).error).toBeDefined()
        clock.advance(1_500)
        // The key whose master answers is decided on the fleet's totals: refused, as Redis would.
        const refused = await hybrid.consume('r', healthy)
        expect(refused).toMatchObject({ allowed: false, reason: 'limited' })
        // A key whose master is silent follows the outage policy.
        const local = await hybrid.consume('r', unseen)
        expect(local.reason).toBe('local-fallback')
        expect(store.stats().mode).toBe('degraded')
      } finally {
        down?.kill('SIGCONT')
      }
      expect((await store.syncNow()).error).toBeUndefined()
      expect(store.stats().mode).toBe('synced')
      expect((await hybrid.consume('r', healthy)).allowed).toBe(false)
      await Promise.all([hybrid.close(), redis.close()])
    },
    60_000,
  )
})

/**
 * The sync script on `node`, called as a Cluster call of two slots is: `hx:r:{k0}:fw` and the
 * call's operation key in KEYS, `others` of another slot after ARGV; `hx:r:{k0}:fw` is charged 1
 * at `now`, the others by `entries`. The entries' lines of the reply.
 */
async function syncTwoSlots(node: Redis, now: number, others: string[], entries: unknown[]): Promise<string[]> {
  const items = JSON.stringify(['fw 10 60000', 2, now, 1, ...entries])
  const reply = (await node.eval(
    syncScript.lua,
    2,
    'hx:op:{k0}',
    'hx:r:{k0}:fw',
    String(now),
    '',
    '1',
    items,
    `1,${others.length}`,
    ...others,
  )) as unknown[]
  return String(reply[2])
    .split('\n')
    .slice(0, others.length + 1)
}

/** Script calls run on the Cluster's masters so far. */
async function clusterScriptCalls(cluster: SpawnedCluster): Promise<number> {
  let calls = 0
  for (const master of await clusterMasters(cluster)) {
    const node = new Redis(master.url)
    calls += await scriptCalls(node)
    node.disconnect()
  }
  return calls
}
