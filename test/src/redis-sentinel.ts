import { Redis, type RedisOptions } from 'ioredis'
import { messageOf } from './error-message.js'
import { pollUntil } from './poll.js'
import { HOST } from './redis-host.js'
import { withNode } from './redis-one-off-connection.js'
import { type SpawnedRedisProcess, spawnRedisProcess } from './redis-process.js'
import { type SpawnedRedis, spawnRedisServer } from './redis-server.js'

export interface SpawnRedisSentinelOptions {
  /**
   * Sentinel processes. The quorum is a majority of them, so the default 3 agree on a failover with 2.
   * @default 3
   */
  sentinels?: number
  /**
   * The name the sentinels monitor the master under; letters, digits, `.`, `_` and `-`.
   * @default 'tollgate'
   */
  masterName?: string
  /**
   * Milliseconds without a valid reply before a sentinel considers the master down.
   * @default 1000
   */
  downAfterMs?: number
  /**
   * Milliseconds a failover may take, and twice this before the same master is failed over again.
   * @default 3000
   */
  failoverTimeoutMs?: number
}

export type SpawnedSentinelProcess = SpawnedRedisProcess

export interface SpawnedSentinel {
  /** The master as started; after a failover it is a replica or, if it was killed, gone. */
  master: SpawnedRedis
  /** The replica as started; the one a failover promotes. */
  replica: SpawnedRedis
  sentinels: SpawnedSentinelProcess[]
  masterName: string
  /** Every sentinel's address, as ioredis's `sentinels` option takes them. */
  sentinelNodes: Array<{ host: '127.0.0.1'; port: number }>
  /** Stops the sentinels, then the master and the replica; calling it again returns the same promise. */
  stop(): Promise<void>
}

interface SentinelConfig {
  masterName: string
  masterPort: number
  quorum: number
  downAfterMs: number
  failoverTimeoutMs: number
}

const MASTER_NAME_PATTERN = /^[A-Za-z0-9._-]+$/
const REPLICATION_TIMEOUT_MS = 10_000
const DISCOVERY_TIMEOUT_MS = 20_000
const DEFAULT_FAILOVER_WAIT_MS = 20_000
const COMMAND_TIMEOUT_MS = 2_000

/**
 * Starts a master, one replica of it and `sentinels` redis-sentinel processes on 127.0.0.1, and
 * resolves once every sentinel sees the master up, the replica linked, and all the other sentinels.
 */
export async function spawnRedisSentinel(options: SpawnRedisSentinelOptions = {}): Promise<SpawnedSentinel> {
  const sentinelCount = options.sentinels ?? 3
  const masterName = options.masterName ?? 'tollgate'
  const downAfterMs = options.downAfterMs ?? 1_000
  const failoverTimeoutMs = options.failoverTimeoutMs ?? 3_000
  checkPositiveInteger('sentinels', sentinelCount)
  checkPositiveInteger('downAfterMs', downAfterMs)
  checkPositiveInteger('failoverTimeoutMs', failoverTimeoutMs)
  // The name is written into a config file, so anything that could end or quote a line is refused.
  if (!MASTER_NAME_PATTERN.test(masterName)) {
    throw new RangeError(`spawnRedisSentinel: masterName must match ${MASTER_NAME_PATTERN}, got ${masterName}`)
  }

  const started: Array<{ stop(): Promise<void> }> = []
  try {
    // The default 5 s delay lets more replicas join one diskless sync; there is only one here.
    const master = await spawnRedisServer({ args: ['--repl-diskless-sync-delay', '0'] })
    started.push(master)
    const replica = await spawnRedisServer({ args: ['--replicaof', HOST, String(master.port)] })
    started.push(replica)
    await waitUntilReplicating(replica)

    const config: SentinelConfig = {
      masterName,
      masterPort: master.port,
      quorum: Math.floor(sentinelCount / 2) + 1,
      downAfterMs,
      failoverTimeoutMs,
    }
    const results = await Promise.allSettled(Array.from({ length: sentinelCount }, () => startSentinel(config)))
    const sentinels = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
    // Sentinels first, so that stopping the master cannot set off a failover.
    started.unshift(...sentinels)
    const failure = results.find((result) => result.status === 'rejected')
    if (failure !== undefined) throw failure.reason

    await waitUntilDiscovered(sentinels, masterName, replica.port)
    return {
      master,
      replica,
      sentinels,
      masterName,
      sentinelNodes: sentinels.map((sentinel) => ({ host: HOST, port: sentinel.port })),
      stop: stopAllOnce(started),
    }
  } catch (error) {
    await stopAllOnce(started)().catch(() => {})
    throw error
  }
}

/** An ioredis client that finds the current master through the sentinels. */
export function sentinelClient(setup: SpawnedSentinel, options: RedisOptions = {}): Redis {
  return new Redis({ ...options, sentinels: setup.sentinelNodes, name: setup.masterName })
}

/**
 * Polls `SENTINEL get-master-addr-by-name` on every sentinel that answers until one of them names
 * a master on a port other than previousMasterPort, and resolves to that address.
 */
export function waitForFailover(
  setup: SpawnedSentinel,
  previousMasterPort: number,
  timeoutMs = DEFAULT_FAILOVER_WAIT_MS,
): Promise<{ host: string; port: number }> {
  return pollUntil(
    `a sentinel names a master other than ${HOST}:${previousMasterPort} for ${setup.masterName}`,
    timeoutMs,
    async () => {
      const answers: string[] = []
      for (const sentinel of setup.sentinels) {
        try {
          const address = (await withNode(
            sentinel.port,
            (client) => client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', setup.masterName),
            COMMAND_TIMEOUT_MS,
          )) as [string, string] | null
          if (address !== null && Number(address[1]) !== previousMasterPort) {
            return { done: true, value: { host: address[0], port: Number(address[1]) } }
          }
          answers.push(`${sentinel.port}: ${address === null ? 'unknown master' : address.join(':')}`)
        } catch (error) {
          // A killed sentinel is expected in failover tests; the others still answer.
          answers.push(`${sentinel.port}: ${messageOf(error)}`)
        }
      }
      return { done: false, state: answers.join('; ') }
    },
  )
}

function checkPositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`spawnRedisSentinel: ${name} must be a positive integer, got ${value}`)
  }
}

function stopAllOnce(started: ReadonlyArray<{ stop(): Promise<void> }>): () => Promise<void> {
  let stopping: Promise<void> | undefined
  return () => {
    stopping ??= (async () => {
      const errors: unknown[] = []
      // In order: the sentinels are at the front.
      for (const member of started) {
        await member.stop().catch((error: unknown) => errors.push(error))
      }
      if (errors.length > 0) throw new AggregateError(errors, 'spawnRedisSentinel: some processes did not stop')
    })()
    return stopping
  }
}

async function waitUntilReplicating(replica: SpawnedRedis): Promise<void> {
  await pollUntil(`the replica ${replica.port} reports master_link_status:up`, REPLICATION_TIMEOUT_MS, async () => {
    const info = await withNode(replica.port, (client) => client.info('replication'), COMMAND_TIMEOUT_MS)
    const status = /^master_link_status:(\w+)/m.exec(info)?.[1] ?? 'absent'
    return status === 'up' ? { done: true, value: undefined } : { done: false, state: `master_link_status:${status}` }
  })
}

async function waitUntilDiscovered(
  sentinels: readonly SpawnedSentinelProcess[],
  masterName: string,
  replicaPort: number,
): Promise<void> {
  const otherSentinels = sentinels.length - 1
  await pollUntil(
    `every sentinel sees ${masterName} up, the replica ${replicaPort} linked and ${otherSentinels} other sentinels`,
    DISCOVERY_TIMEOUT_MS,
    async () => {
      const views = await Promise.all(
        sentinels.map((sentinel) =>
          withNode(
            sentinel.port,
            async (client) => {
              const master = toRecord(await client.call('SENTINEL', 'MASTER', masterName))
              const replicas = ((await client.call('SENTINEL', 'REPLICAS', masterName)) as unknown[]).map(toRecord)
              const replica = replicas.find((candidate) => Number(candidate.port) === replicaPort)
              const ready =
                master.flags === 'master' &&
                Number(master['num-slaves']) >= 1 &&
                Number(master['num-other-sentinels']) === otherSentinels &&
                replica?.flags === 'slave' &&
                replica['master-link-status'] === 'ok'
              const state =
                `${sentinel.port}: master ${master.flags}, num-slaves ${master['num-slaves']}, ` +
                `num-other-sentinels ${master['num-other-sentinels']}, replica ${replica?.flags ?? 'unknown'}`
              return { ready, state }
            },
            COMMAND_TIMEOUT_MS,
          ),
        ),
      )
      return views.every((view) => view.ready)
        ? { done: true, value: undefined }
        : { done: false, state: views.map((view) => view.state).join('; ') }
    },
  )
}

// SENTINEL MASTER and each entry of SENTINEL REPLICAS are flat [field, value, field, value, ...] lists.
function toRecord(reply: unknown): Record<string, string> {
  const fields = reply as string[]
  const record: Record<string, string> = {}
  for (let index = 0; index + 1 < fields.length; index += 2) {
    record[fields[index]!] = fields[index + 1]!
  }
  return record
}

function startSentinel(config: SentinelConfig): Promise<SpawnedSentinelProcess> {
  return spawnRedisProcess({
    binary: 'redis-sentinel',
    debianPackage: 'redis-sentinel',
    dirPrefix: 'tollgate-sentinel-',
    configFile: sentinelConfig(config),
  })
}

// The port, bind address and directory come from spawnRedisProcess's command line.
function sentinelConfig(config: SentinelConfig): string {
  const name = config.masterName
  return [
    'protected-mode no',
    'logfile ""',
    'sentinel resolve-hostnames no',
    `sentinel monitor ${name} ${HOST} ${config.masterPort} ${config.quorum}`,
    `sentinel down-after-milliseconds ${name} ${config.downAfterMs}`,
    `sentinel failover-timeout ${name} ${config.failoverTimeoutMs}`,
    '',
  ].join('\n')
}
