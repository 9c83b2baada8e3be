import type { Redis } from 'ioredis'
import { Redis as RedisClient } from 'ioredis'
import { clusterMasters, spawnRedisCluster } from '../../../test/src/redis-cluster.js'
import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import type { SyncWorkerSetup, SyncWorkerSync } from '../hybrid-sync-worker.js'
import type { MeasureContext } from './context.js'

/** One sync of a HybridStore process, or one floor measured beside it. */
export interface HybridSyncCell {
  /**
   * - `one-redis`: one process syncs `keys` keys to the bench's redis-server
   * - `cluster`: the same on a 3-master Cluster; `redisCpuUs` is the busiest master's
   * - `fleet`: `processes` processes sync `keys` keys each, the same keys, all at once
   * - `floor-incrby`: a pipelined INCRBY of `keys` keys (500 a pipeline, 4 pipelines in flight)
   * - `floor-lua-set`: a script that only SETs each of its 500 keys KEEPTTL: one write per key in Lua
   * - `floor-lua-set-new`: a script that only SETs each of its 500 keys, new to Redis, with a TTL (PX … NX)
   */
  kind: 'one-redis' | 'cluster' | 'fleet' | 'floor-incrby' | 'floor-lua-set' | 'floor-lua-set-new'
  /** The keys' algorithm, one window each; a fixed window when not given (and in runs that did not say). */
  algorithm?: SyncAlgorithm
  /** `first`: the keys are new to Redis; `next`: a later sync, the keys in Redis in the same window. */
  sync: 'first' | 'next' | undefined
  keys: number
  processes: number
  /** A Cluster's masters; 1 otherwise. */
  masters: number
  seconds: number
  /** Redis's CPU (user and system, INFO cpu), µs: the server's, the busiest master's on a Cluster. */
  redisCpuUs: number
  /** The syncing processes' CPU, µs, summed. */
  processCpuUs: number
  /** Fleet: units pushed above a limit by every sync so far, summed over the processes, and the keys' limit. */
  overAdmitted?: number
  limit?: number
  rounds?: number
}

type SyncAlgorithm = NonNullable<SyncWorkerSetup['algorithm']>
/** Beside the fixed window every other run uses, one process's syncs of the other counters. */
const OTHER_ALGORITHMS: SyncAlgorithm[] = ['sliding-window', 'token-bucket']

const CHUNK = 500
const IN_FLIGHT = 4
const FLEET_PROCESSES = 10
const FLEET_LIMIT = 15
const FLEET_ROUNDS = 3

export function hybridSyncUnits(_config: BenchConfig): number {
  return 5 + OTHER_ALGORITHMS.length
}

function keysOf(config: BenchConfig): { one: number; fleet: number } {
  return config.quick ? { one: 100_000, fleet: 10_000 } : { one: 1_000_000, fleet: 100_000 }
}

async function cpuOf(client: Redis): Promise<number> {
  const info = await client.info('cpu')
  const seconds = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN)
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6
}

async function workersOn(setups: SyncWorkerSetup[]): Promise<LineChild[]> {
  const workers = setups.map(() => new LineChild('hybrid-sync-worker.ts', [], ['--max-old-space-size=4096']))
  await Promise.all(workers.map((worker, i) => worker.request(JSON.stringify({ op: 'setup', setup: setups[i] }))))
  return workers
}

const ask = <T>(workers: LineChild[], op: string): Promise<T[]> =>
  Promise.all(workers.map((worker) => worker.request<T>(JSON.stringify({ op }))))

/** Decides once on every key, then syncs: the Redis CPU of `servers` (the busiest's) and the processes'. */
async function roundOf(
  workers: LineChild[],
  servers: Redis[],
): Promise<{ seconds: number; redisCpuUs: number; processCpuUs: number; overAdmitted: number; keys: number }> {
  await ask(workers, 'consume')
  const before = await Promise.all(servers.map(cpuOf))
  const syncs = await ask<SyncWorkerSync>(workers, 'sync')
  const after = await Promise.all(servers.map(cpuOf))
  const failed = syncs.find((sync) => sync.error !== undefined)
  if (failed) throw new Error(`a sync failed: ${failed.error}`)
  return {
    seconds: Math.max(...syncs.map((sync) => sync.seconds)),
    redisCpuUs: Math.max(...after.map((cpu, i) => cpu - (before[i] as number))),
    processCpuUs: syncs.reduce((sum, sync) => sum + sync.cpuUs, 0),
    overAdmitted: syncs.reduce((sum, sync) => sum + sync.overAdmitted, 0),
    keys: syncs.reduce((sum, sync) => sum + sync.keys, 0),
  }
}

/** One process, `keys` keys: its first sync (keys new to Redis) and its next (the same keys again). */
async function twoSyncs(
  kind: 'one-redis' | 'cluster',
  urls: string[],
  servers: Redis[],
  keys: number,
  algorithm: SyncAlgorithm = 'fixed-window',
): Promise<HybridSyncCell[]> {
  // A limit never reached; a bucket's, one whose token takes minutes to refill, so that the units
  // of every key are still owed when the sync comes and each key is written, as a window's is.
  const limit = algorithm === 'token-bucket' ? 10 : 1_000_000
  const [worker] = await workersOn([{ urls, cluster: kind === 'cluster', first: 0, keys, limit, algorithm }])
  const workers = [worker as LineChild]
  try {
    const cells: HybridSyncCell[] = []
    for (const sync of ['first', 'next'] as const) {
      const round = await roundOf(workers, servers)
      cells.push({ kind, algorithm, sync, processes: 1, masters: servers.length, ...round })
    }
    await ask(workers, 'close')
    return cells
  } finally {
    await worker?.close()
  }
}

/**
 * Writes `keys` keys in chunks of CHUNK, IN_FLIGHT chunks at once, each by `write(from, to)`: the
 * time and the CPU of Redis and of this process it took.
 */
async function floorOf(
  kind: 'floor-incrby' | 'floor-lua-set' | 'floor-lua-set-new',
  admin: Redis,
  keys: number,
  write: (from: number, to: number) => Promise<unknown>,
): Promise<HybridSyncCell> {
  const before = await cpuOf(admin)
  const cpu = process.cpuUsage()
  const started = performance.now()
  let next = 0
  const chunks = async (): Promise<void> => {
    while (next < keys) {
      const from = next
      next = Math.min(keys, next + CHUNK)
      await write(from, next)
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, chunks))
  const seconds = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  return {
    kind,
    sync: undefined,
    keys,
    processes: 1,
    masters: 1,
    seconds,
    redisCpuUs: (await cpuOf(admin)) - before,
    processCpuUs: used.user + used.system,
  }
}

const floorKey = (n: number): string => `floor:{user:${String(n).padStart(7, '0')}}`

/** A pipelined INCRBY per key: what Redis and a client spend on the least a key's write can be. */
function incrbyFloor(client: Redis, admin: Redis, keys: number): Promise<HybridSyncCell> {
  return floorOf('floor-incrby', admin, keys, (from, to) => {
    const pipeline = client.pipeline()
    for (let n = from; n < to; n++) pipeline.incrby(floorKey(n), 1)
    return pipeline.exec()
  })
}

/** A script of one SET … KEEPTTL per key, on keys that exist: what a write per key costs in Lua. */
function luaSetFloor(client: Redis, admin: Redis, keys: number): Promise<HybridSyncCell> {
  const lua = "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'KEEPTTL') end return #KEYS"
  return floorOf('floor-lua-set', admin, keys, (from, to) => {
    const names = Array.from({ length: to - from }, (_, i) => floorKey(from + i))
    return client.eval(lua, names.length, ...names, '17637000600001')
  })
}

/** A script of one SET … PX … NX per key, on keys new to Redis: what a new key and its TTL cost in Lua. */
function luaSetNewFloor(client: Redis, admin: Redis, keys: number): Promise<HybridSyncCell> {
  const lua = "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2], 'NX') end return #KEYS"
  return floorOf('floor-lua-set-new', admin, keys, (from, to) => {
    const names = Array.from({ length: to - from }, (_, i) => `new:${floorKey(from + i)}`)
    return client.eval(lua, names.length, ...names, '-1763700060000001', '3600000')
  })
}

/**
 * A HybridStore's sync at scale: one process syncing a million keys to one Redis (its first sync
 * and its next), the floors beside it, the same process on the other counters, the same on a 3-master Cluster, and a fleet of 10 processes
 * syncing the same 100,000 keys each, limited to FLEET_LIMIT, one decision per key per process
 * between syncs, so that some windows pass their limit and the units above it are counted.
 */
export async function measureHybridSync(context: MeasureContext): Promise<HybridSyncCell[]> {
  const { config, client, admin, redisUrl, progress } = context
  const phase = progress.phase('hybrid-sync', hybridSyncUnits(config))
  const keys = keysOf(config)
  const cells: HybridSyncCell[] = []

  phase.note(`one process, ${keys.one} keys, one Redis`)
  await admin.flushall()
  cells.push(...(await twoSyncs('one-redis', [redisUrl], [admin], keys.one)))
  phase.tick('floors')
  await admin.flushall()
  cells.push(await incrbyFloor(client, admin, keys.one))
  cells.push(await luaSetFloor(client, admin, keys.one))
  cells.push(await luaSetNewFloor(client, admin, keys.one))
  for (const algorithm of OTHER_ALGORITHMS) {
    phase.tick(`one process, ${keys.one} keys, one Redis, ${algorithm}`)
    await admin.flushall()
    cells.push(...(await twoSyncs('one-redis', [redisUrl], [admin], keys.one, algorithm)))
  }
  await admin.flushall()
  phase.tick(`${FLEET_PROCESSES} processes × ${keys.fleet} keys`)

  const setups = Array.from({ length: FLEET_PROCESSES }, () => ({
    urls: [redisUrl],
    cluster: false,
    first: 0,
    keys: keys.fleet,
    limit: FLEET_LIMIT,
  }))
  const workers = await workersOn(setups)
  try {
    let overAdmitted = 0
    for (let round = 1; round <= FLEET_ROUNDS; round++) {
      const measured = await roundOf(workers, [admin])
      overAdmitted += measured.overAdmitted
      cells.push({
        kind: 'fleet',
        sync: round === 1 ? 'first' : 'next',
        processes: FLEET_PROCESSES,
        masters: 1,
        limit: FLEET_LIMIT,
        rounds: round,
        ...measured,
        overAdmitted,
      })
    }
    await ask(workers, 'close')
  } finally {
    await Promise.all(workers.map((worker) => worker.close()))
  }
  await admin.flushall()
  phase.tick('a 3-master Cluster')

  const cluster = await spawnRedisCluster({ masters: 3 })
  const masters = (await clusterMasters(cluster)).map((node) => new RedisClient(node.url))
  try {
    cells.push(
      ...(await twoSyncs(
        'cluster',
        cluster.startupNodes.map((node) => `redis://${node.host}:${node.port}`),
        masters,
        keys.one,
      )),
    )
  } finally {
    for (const master of masters) master.disconnect()
    await cluster.stop()
  }
  phase.tick()
  phase.done()
  return cells
}
