import { setTimeout as delay } from 'node:timers/promises'
import type { Cluster } from 'ioredis'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  clusterClient,
  clusterMasters,
  masterOfSlot,
  migrateSlot,
  type SpawnedCluster,
  spawnRedisCluster,
  waitReady,
} from '../src/redis-cluster.js'
import { type SpawnedSentinel, sentinelClient, spawnRedisSentinel, waitForFailover } from '../src/redis-sentinel.js'
import type { SpawnedRedis } from '../src/redis-server.js'

const RETRY_INTERVAL_MS = 50
// Errors a client sees while its master is gone and the sentinels have yet to name the new one.
const FAILOVER_ERROR = /MaxRetriesPerRequestError|Connection is closed|ECONNREFUSED|ECONNRESET|Command timed out/

async function onNode<T>(node: SpawnedRedis, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(node.url, { maxRetriesPerRequest: 1, lazyConnect: true })
  try {
    await client.connect()
    return await use(client)
  } finally {
    client.disconnect()
  }
}

async function closeClient(client: Redis | Cluster | undefined): Promise<void> {
  await client?.quit().catch(() => client.disconnect())
}

describe('spawnRedisCluster', () => {
  let cluster: SpawnedCluster | undefined
  let client: Cluster | undefined
  const started = () => {
    if (cluster === undefined || client === undefined) throw new Error('the cluster did not start in beforeAll')
    return { cluster, client }
  }

  beforeAll(async () => {
    cluster = await spawnRedisCluster()
    client = clusterClient(cluster)
    await waitReady(client)
  }, 40_000)

  afterAll(async () => {
    await closeClient(client)
    await cluster?.stop()
  }, 20_000)

  it('forms three masters that every node agrees serve all 16384 slots', async () => {
    const { cluster } = started()

    expect(await clusterMasters(cluster)).toHaveLength(3)
    for (const node of cluster.nodes) {
      const info = await onNode(node, (direct) => direct.cluster('INFO'))
      expect(info).toContain('cluster_state:ok')
      expect(info).toContain('cluster_slots_assigned:16384')
    }
  }, 10_000)

  it('lets a Cluster client write and read keys on each of the three masters', async () => {
    const { cluster, client } = started()
    const keyByMaster = new Map<number, string>()
    for (let index = 0; keyByMaster.size < 3 && index < 100; index++) {
      const key = `topology:${index}`
      const owner = await masterOfSlot(cluster, await client.cluster('KEYSLOT', key))
      if (!keyByMaster.has(owner.port)) keyByMaster.set(owner.port, key)
    }
    expect(keyByMaster.size).toBe(3)

    for (const [port, key] of keyByMaster) {
      await client.set(key, `on ${port}`)
      expect(await client.get(key)).toBe(`on ${port}`)
      const owner = cluster.nodes.find((node) => node.port === port)!
      expect(await onNode(owner, (direct) => direct.get(key))).toBe(`on ${port}`)
    }
  }, 10_000)

  it('migrateSlot moves a slot and its keys, in several batches, and the Cluster client follows', async () => {
    const { cluster, client } = started()
    // One hash tag puts every key in one slot; 250 keys take three GETKEYSINSLOT batches of 100.
    const keys = Array.from({ length: 250 }, (_, index) => `{migrated}:${index}`)
    const slot = await client.cluster('KEYSLOT', keys[0]!)
    await Promise.all(keys.map((key) => client.set(key, key)))
    const from = await masterOfSlot(cluster, slot)
    const to = (await clusterMasters(cluster)).find((master) => master.port !== from.port)!

    expect(await migrateSlot(cluster, slot, from, to)).toBe(keys.length)

    expect((await masterOfSlot(cluster, slot)).port).toBe(to.port)
    expect(await onNode(to, (direct) => direct.cluster('COUNTKEYSINSLOT', slot))).toBe(keys.length)
    expect(await onNode(from, (direct) => direct.cluster('COUNTKEYSINSLOT', slot))).toBe(0)
    expect(await Promise.all(keys.map((key) => client.get(key)))).toEqual(keys)
  }, 15_000)

  it('migrateSlot refuses a source that does not serve the slot, before changing anything', async () => {
    const { cluster, client } = started()
    const slot = await client.cluster('KEYSLOT', '{refused}')
    const owner = await masterOfSlot(cluster, slot)
    const [notOwner, target] = (await clusterMasters(cluster)).filter((master) => master.port !== owner.port)

    await expect(migrateSlot(cluster, slot, notOwner!, target!)).rejects.toThrow(
      `slot ${slot} is served by ${owner.port}, not by ${notOwner!.port}`,
    )
    expect((await masterOfSlot(cluster, slot)).port).toBe(owner.port)
  }, 10_000)
})

describe('spawnRedisCluster with replicas', () => {
  it('gives each master its replicas', async () => {
    const cluster = await spawnRedisCluster({ replicasPerMaster: 1 })
    try {
      expect(cluster.nodes).toHaveLength(6)
      expect(await clusterMasters(cluster)).toHaveLength(3)
      for (const node of cluster.nodes) {
        expect(await onNode(node, (direct) => direct.cluster('INFO'))).toContain('cluster_state:ok')
      }
    } finally {
      await cluster.stop()
    }
  }, 30_000)

  it('refuses fewer than three masters', async () => {
    await expect(spawnRedisCluster({ masters: 2 })).rejects.toThrow('masters must be an integer of at least 3, got 2')
  })
})

describe('spawnRedisSentinel', () => {
  let setup: SpawnedSentinel | undefined
  let client: Redis | undefined
  const started = () => {
    if (setup === undefined) throw new Error('the sentinels did not start in beforeAll')
    return setup
  }

  beforeAll(async () => {
    setup = await spawnRedisSentinel()
  }, 30_000)

  afterAll(async () => {
    await closeClient(client)
    await setup?.stop()
  }, 20_000)

  it('forms: every sentinel names the master and knows the replica', async () => {
    const setup = started()

    expect(setup.sentinels).toHaveLength(3)
    for (const sentinel of setup.sentinelNodes) {
      const direct = new Redis({ ...sentinel, lazyConnect: true, maxRetriesPerRequest: 1 })
      try {
        await direct.connect()
        expect(await direct.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', setup.masterName)).toEqual([
          '127.0.0.1',
          String(setup.master.port),
        ])
      } finally {
        direct.disconnect()
      }
    }
  }, 10_000)

  it('fails over to the replica when the master is SIGKILLed, and a client through the sentinels writes again', async () => {
    const setup = started()
    // One retry per command, so a write during the failover fails fast and the loop below retries it.
    client = sentinelClient(setup, { maxRetriesPerRequest: 1 })
    // Refused connections to the killed master are expected until the sentinels name the replica;
    // writeUntilAccepted reports the last one if the failover never completes.
    client.on('error', () => {})
    await waitReady(client)
    await client.set('failover:before', 'written to the first master')
    // Replication is asynchronous; without WAIT the SIGKILL could beat the write to the replica.
    expect(await client.wait(1, 2_000)).toBe(1)

    const previousMasterPort = setup.master.port
    setup.master.kill('SIGKILL')
    const promoted = await waitForFailover(setup, previousMasterPort, 15_000)

    expect(promoted.port).toBe(setup.replica.port)
    await writeUntilAccepted(client, 'failover:after', 'written to the promoted replica', 10_000)
    expect(await client.get('failover:before')).toBe('written to the first master')
    expect(await onNode(setup.replica, (direct) => direct.get('failover:after'))).toBe(
      'written to the promoted replica',
    )
  }, 25_000)
})

async function writeUntilAccepted(client: Redis, key: string, value: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      await client.set(key, value)
      return
    } catch (error) {
      const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
      if (!FAILOVER_ERROR.test(text)) throw error
      if (Date.now() >= deadline) {
        throw new Error(`SET ${key} still failed ${timeoutMs} ms into the failover: ${text}`, { cause: error })
      }
      await delay(RETRY_INTERVAL_MS)
    }
  }
}
