import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Cluster, type ClusterOptions, type Redis } from 'ioredis'
import { messageOf } from './error-message.js'
import { pollUntil } from './poll.js'
import { HOST } from './redis-host.js'
import { withNode } from './redis-one-off-connection.js'
import { type SpawnedRedis, spawnRedisServer } from './redis-server.js'

export interface SpawnRedisClusterOptions {
  /**
   * Masters; redis-cli splits the 16384 slots evenly between them and refuses fewer than 3.
   * @default 3
   */
  masters?: number
  /**
   * Replicas given to each master.
   * @default 0
   * @example 1
   */
  replicasPerMaster?: number
}

export interface SpawnedCluster {
  /**
   * Every node, masters and replicas. redis-cli decides which is which, so ask masterOfSlot() or
   * clusterMasters() rather than relying on the order.
   */
  nodes: SpawnedRedis[]
  /** Every node's address, as `new Cluster(startupNodes)` takes them. */
  startupNodes: Array<{ host: '127.0.0.1'; port: number }>
  /** Stops every node; calling it again returns the same promise. */
  stop(): Promise<void>
}

interface ClusterNodeEntry {
  id: string
  port: number
  flags: string[]
  /** Inclusive ranges; slots being imported or migrated (`[slot-<-id]`) are left out. */
  slots: Array<[number, number]>
}

const SLOT_COUNT = 16_384
const NODE_ARGS = [
  '--cluster-enabled',
  'yes',
  // Relative to the node's own temporary --dir, so nodes do not share it.
  '--cluster-config-file',
  'nodes.conf',
  '--cluster-node-timeout',
  '2000',
  '--appendonly',
  'no',
  // The default 5 s delay lets more replicas join one diskless sync; each master has few.
  '--repl-diskless-sync-delay',
  '0',
]
const CREATE_TIMEOUT_MS = 30_000
const FORMATION_TIMEOUT_MS = 20_000
const CONVERGENCE_TIMEOUT_MS = 10_000
const READY_TIMEOUT_MS = 10_000
const MIGRATE_BATCH_KEYS = 100
// MIGRATE's timeout bounds each idle wait on the target, not the whole transfer.
const MIGRATE_IDLE_TIMEOUT_MS = 2_000
const UNREACHABLE_FLAGS = ['fail', 'fail?', 'handshake', 'noaddr']

const execFileAsync = promisify(execFile)

/**
 * Starts `masters × (1 + replicasPerMaster)` cluster-enabled redis-server processes on 127.0.0.1,
 * joins them with `redis-cli --cluster create`, and resolves once every node reports
 * `cluster_state:ok` with all 16384 slots assigned, agrees on which nodes are masters, and every
 * replica has synced with its master.
 */
export async function spawnRedisCluster(options: SpawnRedisClusterOptions = {}): Promise<SpawnedCluster> {
  const masters = options.masters ?? 3
  const replicasPerMaster = options.replicasPerMaster ?? 0
  if (!Number.isInteger(masters) || masters < 3) {
    throw new RangeError(`spawnRedisCluster: masters must be an integer of at least 3, got ${masters}`)
  }
  if (!Number.isInteger(replicasPerMaster) || replicasPerMaster < 0) {
    throw new RangeError(
      `spawnRedisCluster: replicasPerMaster must be a non-negative integer, got ${replicasPerMaster}`,
    )
  }

  const cluster = describeCluster(await spawnNodes(masters * (1 + replicasPerMaster)))
  try {
    await createCluster(cluster.nodes, replicasPerMaster)
    await waitUntilFormed(cluster.nodes, masters)
  } catch (error) {
    await cluster.stop()
    throw error
  }
  return cluster
}

async function spawnNodes(count: number): Promise<SpawnedRedis[]> {
  const results = await Promise.allSettled(Array.from({ length: count }, () => spawnRedisServer({ args: NODE_ARGS })))
  const nodes = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  const failure = results.find((result) => result.status === 'rejected')
  if (failure !== undefined) {
    await Promise.all(nodes.map((node) => node.stop()))
    throw failure.reason
  }
  return nodes
}

function describeCluster(nodes: SpawnedRedis[]): SpawnedCluster {
  let stopping: Promise<void> | undefined
  return {
    nodes,
    startupNodes: nodes.map((node) => ({ host: HOST, port: node.port })),
    stop() {
      stopping ??= (async () => {
        const results = await Promise.allSettled(nodes.map((node) => node.stop()))
        const errors = results.flatMap((result) => (result.status === 'rejected' ? [result.reason] : []))
        if (errors.length > 0) throw new AggregateError(errors, 'spawnRedisCluster: some nodes did not stop')
      })()
      return stopping
    },
  }
}

async function createCluster(nodes: readonly SpawnedRedis[], replicasPerMaster: number): Promise<void> {
  const args = [
    '--cluster',
    'create',
    ...nodes.map((node) => `${HOST}:${node.port}`),
    '--cluster-replicas',
    String(replicasPerMaster),
    '--cluster-yes',
  ]
  try {
    await execFileAsync('redis-cli', args, { timeout: CREATE_TIMEOUT_MS })
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string; killed?: boolean }
    if (failure.code === 'ENOENT') {
      throw new Error('redis-cli was not found on PATH (Debian: apt-get install redis-tools)', { cause: error })
    }
    const why = failure.killed ? `did not finish within ${CREATE_TIMEOUT_MS} ms` : `failed (${failure.message})`
    throw new Error(`redis-cli ${args.join(' ')} ${why}:\n${failure.stdout ?? ''}${failure.stderr ?? ''}`, {
      cause: error,
    })
  }
}

async function waitUntilFormed(nodes: readonly SpawnedRedis[], masters: number): Promise<void> {
  const expected = ['cluster_state:ok', `cluster_slots_assigned:${SLOT_COUNT}`, `cluster_known_nodes:${nodes.length}`]
  const what =
    `every node reports ${expected.join(', ')} and sees ${masters} masters and ` +
    `${nodes.length - masters} replicas, and every replica reports master_link_status:up`
  await pollUntil(what, FORMATION_TIMEOUT_MS, async () => {
    const pending = await Promise.all(
      nodes.map((node) => withNode(node.port, (client) => whyNotFormed(client, expected, masters))),
    )
    const waiting = nodes.flatMap((node, index) =>
      pending[index] === undefined ? [] : [`${node.port} ${pending[index]}`],
    )
    return waiting.length === 0 ? { done: true, value: undefined } : { done: false, state: waiting.join('; ') }
  })
}

// cluster_state:ok comes before every node has heard through gossip which nodes redis-cli made
// replicas, and before those replicas have synced; tests that read the topology need both.
async function whyNotFormed(client: Redis, expected: readonly string[], masters: number): Promise<string | undefined> {
  const lines = new Set((await client.cluster('INFO')).split('\r\n'))
  const missing = expected.filter((line) => !lines.has(line))
  if (missing.length > 0) return `lacks ${missing.join(', ')}`
  const topology = await readClusterNodes(client)
  const seenMasters = topology.filter(isMaster).length
  if (seenMasters !== masters) return `sees ${seenMasters} masters`
  const unreachable = topology.filter((entry) => !isReachable(entry))
  if (unreachable.length > 0)
    return `flags ${unreachable.map((entry) => `${entry.port} ${entry.flags.join(',')}`).join(', ')}`
  const myself = topology.find((entry) => entry.flags.includes('myself'))
  if (myself === undefined || isMaster(myself)) return undefined
  const link = /^master_link_status:(\w+)/m.exec(await client.info('replication'))?.[1] ?? 'absent'
  return link === 'up' ? undefined : `is a replica with master_link_status:${link}`
}

/**
 * An ioredis Cluster client for the spawned cluster. Call waitReady() before the first command
 * when a test must not race the client's initial slot discovery.
 */
export function clusterClient(
  cluster: SpawnedCluster,
  options: Omit<ClusterOptions, 'enableReadyCheck'> = {},
): Cluster {
  // With the ready check, 'ready' waits for CLUSTER INFO to say cluster_state:ok; waitReady relies on that.
  return new Cluster(cluster.startupNodes, { ...options, enableReadyCheck: true })
}

/**
 * Resolves once the client emits 'ready', connecting it first if it was created with lazyConnect.
 * Rejects if the connection ends first or when timeoutMs passes, naming the last error seen.
 */
export function waitReady(client: Cluster | Redis, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  if (client.status === 'ready') return Promise.resolve()
  return new Promise((resolve, reject) => {
    let lastError: unknown
    const lastErrorText = () => (lastError === undefined ? 'none' : messageOf(lastError))
    const onReady = () => {
      cleanUp()
      resolve()
    }
    const onError = (error: unknown) => {
      lastError = error
    }
    const onEnd = () => {
      cleanUp()
      reject(new Error(`waitReady: the connection ended before it was ready; last error: ${lastErrorText()}`))
    }
    const timer = setTimeout(() => {
      cleanUp()
      reject(
        new Error(
          `waitReady: not ready within ${timeoutMs} ms (status ${client.status}); last error: ${lastErrorText()}`,
        ),
      )
    }, timeoutMs)
    const cleanUp = () => {
      clearTimeout(timer)
      client.off('ready', onReady)
      client.off('error', onError)
      client.off('end', onEnd)
    }
    client.on('ready', onReady)
    client.on('error', onError)
    client.on('end', onEnd)
    if (client.status === 'wait') client.connect().catch(onError)
  })
}

/** The master that serves the slot, as the first node that answers CLUSTER NODES sees it. */
export async function masterOfSlot(cluster: SpawnedCluster, slot: number): Promise<SpawnedRedis> {
  checkSlot(slot)
  const topology = await readTopology(cluster)
  const owner = topology.find((entry) => isMaster(entry) && serves(entry, slot))
  if (owner === undefined) throw new Error(`masterOfSlot: no master serves slot ${slot}`)
  return nodeAt(cluster, owner.port)
}

/** The nodes that are masters, as the first node that answers CLUSTER NODES sees it. */
export async function clusterMasters(cluster: SpawnedCluster): Promise<SpawnedRedis[]> {
  const topology = await readTopology(cluster)
  return topology.filter(isMaster).map((entry) => nodeAt(cluster, entry.port))
}

/**
 * Moves a slot and its keys from one master to another the way redis-cli --cluster reshard does:
 * SETSLOT IMPORTING on the target, SETSLOT MIGRATING on the source, MIGRATE in batches of
 * CLUSTER GETKEYSINSLOT, then SETSLOT NODE on every master. Resolves to the number of keys moved,
 * once every reachable node reports the target as the slot's owner.
 */
export async function migrateSlot(
  cluster: SpawnedCluster,
  slot: number,
  fromNode: SpawnedRedis,
  toNode: SpawnedRedis,
): Promise<number> {
  checkSlot(slot)
  nodeAt(cluster, fromNode.port)
  nodeAt(cluster, toNode.port)
  if (fromNode.port === toNode.port) throw new Error(`migrateSlot: source and target are both ${fromNode.port}`)
  const topology = await withNode(fromNode.port, readClusterNodes)
  const source = masterAt(topology, fromNode.port, 'source')
  const target = masterAt(topology, toNode.port, 'target')
  if (!serves(source, slot)) {
    const owner = topology.find((entry) => isMaster(entry) && serves(entry, slot))
    throw new Error(`migrateSlot: slot ${slot} is served by ${owner?.port ?? 'no master'}, not by ${fromNode.port}`)
  }

  await withNode(toNode.port, (client) => client.cluster('SETSLOT', slot, 'IMPORTING', source.id))
  await withNode(fromNode.port, (client) => client.cluster('SETSLOT', slot, 'MIGRATING', target.id))
  const moved = await withNode(fromNode.port, (client) => migrateKeys(client, slot, toNode.port))

  // Target first, then source, as redis-cli does: once the source gives the slot up it redirects
  // clients to the target, which must already consider the slot its own rather than importing.
  await withNode(toNode.port, (client) => client.cluster('SETSLOT', slot, 'NODE', target.id))
  await withNode(fromNode.port, (client) => client.cluster('SETSLOT', slot, 'NODE', target.id))
  const otherMasters = topology.filter(
    (entry) => isMaster(entry) && isReachable(entry) && entry.id !== source.id && entry.id !== target.id,
  )
  await Promise.all(
    otherMasters.map((entry) => withNode(entry.port, (client) => client.cluster('SETSLOT', slot, 'NODE', target.id))),
  )

  // Replicas learn the new owner only from gossip.
  const reachable = topology.filter(isReachable)
  await pollUntil(
    `every reachable node reports ${toNode.port} as the owner of slot ${slot}`,
    CONVERGENCE_TIMEOUT_MS,
    async () => {
      const views = await Promise.all(reachable.map((entry) => withNode(entry.port, readClusterNodes)))
      const disagreeing = reachable.filter((_, index) => {
        const owner = views[index]?.find((entry) => isMaster(entry) && serves(entry, slot))
        return owner?.id !== target.id
      })
      return disagreeing.length === 0
        ? { done: true, value: undefined }
        : { done: false, state: `not yet: ${disagreeing.map((entry) => entry.port).join(', ')}` }
    },
  )
  return moved
}

async function migrateKeys(source: Redis, slot: number, targetPort: number): Promise<number> {
  let moved = 0
  for (;;) {
    // Buffers keep binary key names intact on the way through.
    const keys = (await source.callBuffer('CLUSTER', 'GETKEYSINSLOT', slot, MIGRATE_BATCH_KEYS)) as Buffer[]
    if (keys.length === 0) return moved
    // An empty key name and the KEYS option make MIGRATE move the whole batch in one call.
    await source.call('MIGRATE', HOST, targetPort, '', 0, MIGRATE_IDLE_TIMEOUT_MS, 'KEYS', ...keys)
    moved += keys.length
  }
}

function checkSlot(slot: number): void {
  if (!Number.isInteger(slot) || slot < 0 || slot >= SLOT_COUNT) {
    throw new RangeError(`slot must be an integer from 0 to ${SLOT_COUNT - 1}, got ${slot}`)
  }
}

function masterAt(topology: readonly ClusterNodeEntry[], port: number, role: string): ClusterNodeEntry {
  const entry = topology.find((candidate) => candidate.port === port)
  if (entry === undefined) throw new Error(`migrateSlot: the ${role} ${port} is not in the cluster`)
  if (!isMaster(entry)) throw new Error(`migrateSlot: the ${role} ${port} is not a master (${entry.flags.join(',')})`)
  return entry
}

function nodeAt(cluster: SpawnedCluster, port: number): SpawnedRedis {
  const node = cluster.nodes.find((candidate) => candidate.port === port)
  if (node === undefined) throw new Error(`CLUSTER NODES names ${HOST}:${port}, which this cluster did not spawn`)
  return node
}

function isMaster(entry: ClusterNodeEntry): boolean {
  return entry.flags.includes('master')
}

function isReachable(entry: ClusterNodeEntry): boolean {
  return !entry.flags.some((flag) => UNREACHABLE_FLAGS.includes(flag))
}

function serves(entry: ClusterNodeEntry, slot: number): boolean {
  return entry.slots.some(([first, last]) => slot >= first && slot <= last)
}

async function readTopology(cluster: SpawnedCluster): Promise<ClusterNodeEntry[]> {
  const failures: string[] = []
  for (const node of cluster.nodes) {
    try {
      return await withNode(node.port, readClusterNodes)
    } catch (error) {
      failures.push(`${node.port}: ${messageOf(error)}`)
    }
  }
  throw new Error(`No cluster node answered CLUSTER NODES: ${failures.join('; ')}`)
}

async function readClusterNodes(client: Redis): Promise<ClusterNodeEntry[]> {
  // ioredis types the reply as unknown, but CLUSTER NODES answers with one bulk string.
  return parseClusterNodes(String(await client.cluster('NODES')))
}

// Each line: <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
function parseClusterNodes(text: string): ClusterNodeEntry[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id = '', address = '', flags = '', , , , , , ...slots] = line.trim().split(' ')
      const port = Number(address.split('@')[0]?.split(':').pop())
      return {
        id,
        port,
        flags: flags.split(','),
        slots: slots
          .filter((slotField) => !slotField.startsWith('['))
          .map((slotField): [number, number] => {
            const [first, last = first] = slotField.split('-')
            return [Number(first), Number(last)]
          }),
      }
    })
}
