import { type ChildProcess, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { Redis, type RedisOptions } from 'ioredis'
import { findFreePort } from './free-port.js'
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

export interface SpawnedSentinelProcess {
  port: number
  pid: number
  /**
   * SIGTERM, then SIGKILL if the sentinel is still running 5 s later; resolves once it has exited
   * and its directory is removed. Calling it again returns the same promise.
   */
  stop(): Promise<void>
  /**
   * Sends a signal and returns at once. Call stop() afterwards to remove the directory.
   * @default 'SIGKILL'
   */
  kill(signal?: NodeJS.Signals): void
}

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

type Poll<T> = { done: true; value: T } | { done: false; state: string }

type StartAttempt =
  | { outcome: 'ready'; sentinel: SpawnedSentinelProcess }
  | { outcome: 'port-taken'; error: Error }
  | { outcome: 'failed'; error: Error }

const HOST = '127.0.0.1'
const BINARY = 'redis-sentinel'
const MASTER_NAME_PATTERN = /^[A-Za-z0-9._-]+$/
const PORT_ATTEMPTS = 5
const START_TIMEOUT_MS = 10_000
const REPLICATION_TIMEOUT_MS = 10_000
const DISCOVERY_TIMEOUT_MS = 20_000
const DEFAULT_FAILOVER_WAIT_MS = 20_000
const POLL_INTERVAL_MS = 50
const COMMAND_TIMEOUT_MS = 2_000
const STOP_GRACE_MS = 5_000
const OUTPUT_TAIL_CHARS = 4_000

const running = new Map<ChildProcess, string>()
let exitHookInstalled = false

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
          const address = (await withNode(sentinel.port, (client) =>
            client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', setup.masterName),
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
    const info = await withNode(replica.port, (client) => client.info('replication'))
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
          withNode(sentinel.port, async (client) => {
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
          }),
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

async function startSentinel(config: SentinelConfig): Promise<SpawnedSentinelProcess> {
  let lastPortError: Error | undefined
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await findFreePort()
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-sentinel-'))
    // Sentinel rewrites its config file as it learns the topology, so it lives in a directory of its own.
    const configPath = join(dir, 'sentinel.conf')
    await writeFile(configPath, sentinelConfig(port, dir, config))
    const started = await startOnPort(configPath, port, dir)
    if (started.outcome === 'ready') return started.sentinel
    await rm(dir, { recursive: true, force: true })
    if (started.outcome === 'failed') throw started.error
    lastPortError = started.error
  }
  throw new Error(`${BINARY}: another process took the chosen port ${PORT_ATTEMPTS} times in a row; giving up`, {
    cause: lastPortError,
  })
}

function sentinelConfig(port: number, dir: string, config: SentinelConfig): string {
  const name = config.masterName
  return [
    `port ${port}`,
    `bind ${HOST}`,
    // Redis reads double-quoted config values with the same escapes as JSON strings.
    `dir ${JSON.stringify(dir)}`,
    'daemonize no',
    'protected-mode no',
    'logfile ""',
    'sentinel resolve-hostnames no',
    `sentinel monitor ${name} ${HOST} ${config.masterPort} ${config.quorum}`,
    `sentinel down-after-milliseconds ${name} ${config.downAfterMs}`,
    `sentinel failover-timeout ${name} ${config.failoverTimeoutMs}`,
    '',
  ].join('\n')
}

async function startOnPort(configPath: string, port: number, dir: string): Promise<StartAttempt> {
  const child = spawn(BINARY, [configPath], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  const spawnFailed = new Promise<NodeJS.ErrnoException>((resolve) => child.on('error', resolve))
  let output = ''
  const keepTail = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_TAIL_CHARS)
  }
  child.stdout?.on('data', keepTail)
  child.stderr?.on('data', keepTail)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const outputClosed = new Promise<void>((resolve) => child.once('close', () => resolve()))
  const hasExited = () => child.exitCode !== null || child.signalCode !== null

  const pid = child.pid
  if (pid === undefined) {
    const error = await spawnFailed
    const why =
      error.code === 'ENOENT'
        ? `${BINARY} was not found on PATH (Debian: apt-get install redis-sentinel)`
        : `${BINARY} could not be started: ${error.message}`
    return { outcome: 'failed', error: new Error(why, { cause: error }) }
  }
  killOnParentExit(child, dir)

  const deadline = Date.now() + START_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (hasExited()) {
      running.delete(child)
      // 'exit' can come before the last output is read, and that output says why it exited.
      await settlesWithin(outputClosed, 1_000)
      const status = child.exitCode !== null ? `code ${child.exitCode}` : `signal ${child.signalCode}`
      const error = new Error(`${BINARY} on ${HOST}:${port} exited with ${status} before answering PING:\n${output}`)
      return { outcome: output.includes('Address already in use') ? 'port-taken' : 'failed', error }
    }
    const answeringPid = await pingAndReadPid(port)
    if (answeringPid === pid) {
      return { outcome: 'ready', sentinel: describeSentinel(child, pid, port, dir, exited, hasExited) }
    }
    if (answeringPid !== undefined) {
      // Another server got the port first; ours will fail to bind and exit.
      await stopChild(child, exited, hasExited)
      running.delete(child)
      return {
        outcome: 'port-taken',
        error: new Error(`${HOST}:${port} is served by pid ${answeringPid}, not by the spawned pid ${pid}`),
      }
    }
    await delay(POLL_INTERVAL_MS)
  }
  await stopChild(child, exited, hasExited)
  running.delete(child)
  return {
    outcome: 'failed',
    error: new Error(`${BINARY} on ${HOST}:${port} did not answer PING within ${START_TIMEOUT_MS} ms:\n${output}`),
  }
}

/** The pid of the process that answered PING on the port, so a process that is not ours is noticed. */
async function pingAndReadPid(port: number): Promise<number | undefined> {
  try {
    return await withNode(port, async (client) => {
      if ((await client.ping()) !== 'PONG') return undefined
      const match = /^process_id:(\d+)/m.exec(await client.info('server'))
      return match?.[1] === undefined ? undefined : Number(match[1])
    })
  } catch {
    // Refused connections are the expected answer until the sentinel listens.
    return undefined
  }
}

function describeSentinel(
  child: ChildProcess,
  pid: number,
  port: number,
  dir: string,
  exited: Promise<void>,
  hasExited: () => boolean,
): SpawnedSentinelProcess {
  let stopping: Promise<void> | undefined
  return {
    port,
    pid,
    stop() {
      stopping ??= (async () => {
        await stopChild(child, exited, hasExited)
        running.delete(child)
        await rm(dir, { recursive: true, force: true })
      })()
      return stopping
    },
    kill(signal = 'SIGKILL') {
      child.kill(signal)
    },
  }
}

async function stopChild(child: ChildProcess, exited: Promise<void>, hasExited: () => boolean): Promise<void> {
  if (hasExited()) return
  child.kill('SIGTERM')
  // A sentinel paused by kill('SIGSTOP') acts on SIGTERM only once it runs again.
  child.kill('SIGCONT')
  if (await settlesWithin(exited, STOP_GRACE_MS)) return
  child.kill('SIGKILL')
  if (await settlesWithin(exited, STOP_GRACE_MS)) return
  throw new Error(`${BINARY} pid ${child.pid} did not exit ${STOP_GRACE_MS} ms after SIGKILL`)
}

async function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(resolve, ms, false)
  })
  try {
    return await Promise.race([promise.then(() => true), timedOut])
  } finally {
    clearTimeout(timer)
  }
}

function killOnParentExit(child: ChildProcess, dir: string): void {
  running.set(child, dir)
  if (exitHookInstalled) return
  exitHookInstalled = true
  // 'exit' listeners must be synchronous, hence SIGKILL without waiting and rmSync.
  process.on('exit', () => {
    for (const [orphan, orphanDir] of running) {
      orphan.kill('SIGKILL')
      rmSync(orphanDir, { recursive: true, force: true })
    }
  })
}

/** A short-lived connection that fails fast instead of queueing or reconnecting. */
async function withNode<T>(port: number, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: COMMAND_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
  })
  // The awaited connect() or command rejects with the same error.
  client.on('error', () => {})
  try {
    await client.connect()
    return await use(client)
  } finally {
    client.disconnect()
  }
}

/** Calls check until it reports done; on timeout the error names what was awaited and the last state seen. */
async function pollUntil<T>(what: string, timeoutMs: number, check: () => Promise<Poll<T>>): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastState = 'not checked'
  for (;;) {
    try {
      const result = await check()
      if (result.done) return result.value
      lastState = result.state
    } catch (error) {
      lastState = messageOf(error)
    }
    if (Date.now() >= deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}; last seen: ${lastState}`)
    }
    await delay(POLL_INTERVAL_MS)
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
