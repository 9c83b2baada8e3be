import { type ChildProcess, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { findFreePort } from './free-port.js'

export interface SpawnRedisServerOptions {
  /**
   * Arguments placed after the defaults (`--port`, `--bind 127.0.0.1`, `--save ""`,
   * `--appendonly no`, `--daemonize no`, `--dir <temporary>`); redis-server lets a later argument
   * override an earlier one.
   * @default []
   * @example ['--cluster-enabled', 'yes']
   */
  args?: string[]
  /**
   * The executable, looked up on PATH unless it is a path.
   * @default 'redis-server'
   */
  binary?: string
}

export interface SpawnedRedis {
  host: '127.0.0.1'
  port: number
  /** @example 'redis://127.0.0.1:41234' */
  url: string
  pid: number
  /**
   * SIGTERM, then SIGKILL if the server is still running 5 s later; resolves once it has exited
   * and its data directory is removed. Calling it again returns the same promise.
   */
  stop(): Promise<void>
  /**
   * Sends a signal and returns at once, e.g. SIGKILL to simulate a crash or SIGSTOP to simulate a
   * server that hangs. Call stop() afterwards to remove the data directory.
   * @default 'SIGKILL'
   */
  kill(signal?: NodeJS.Signals): void
}

const HOST = '127.0.0.1'
const READY_TIMEOUT_MS = 10_000
const PROBE_INTERVAL_MS = 20
const PROBE_CONNECT_TIMEOUT_MS = 500
const STOP_GRACE_MS = 5_000
const PORT_ATTEMPTS = 5
const OUTPUT_TAIL_CHARS = 4_000
// The cluster bus listens on port + 10000, and redis-server refuses a port that leaves no room for it.
const MAX_CLUSTER_NODE_PORT = 55_535
const MAX_PORT = 65_535

type StartAttempt =
  | { outcome: 'ready'; server: SpawnedRedis }
  | { outcome: 'port-taken'; error: Error }
  | { outcome: 'failed'; error: Error }

const running = new Map<ChildProcess, string>()
let exitHooksInstalled = false

export async function spawnRedisServer(options: SpawnRedisServerOptions = {}): Promise<SpawnedRedis> {
  const binary = options.binary ?? 'redis-server'
  const args = options.args ?? []
  const maxPort = isClusterNode(args) ? MAX_CLUSTER_NODE_PORT : MAX_PORT
  let lastPortError: Error | undefined
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await findFreePortAtMost(maxPort)
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-redis-'))
    const started = await startOnPort(binary, port, dir, args)
    if (started.outcome === 'ready') return started.server
    await rm(dir, { recursive: true, force: true })
    if (started.outcome === 'failed') throw started.error
    lastPortError = started.error
  }
  throw new Error(`${binary}: another process took the chosen port ${PORT_ATTEMPTS} times in a row; giving up`, {
    cause: lastPortError,
  })
}

function isClusterNode(args: readonly string[]): boolean {
  const index = args.indexOf('--cluster-enabled')
  return index !== -1 && args[index + 1] === 'yes'
}

async function findFreePortAtMost(maxPort: number): Promise<number> {
  // Linux hands out ports up to 60999, so about one in five is too high for a cluster node.
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await findFreePort()
    if (port <= maxPort) return port
  }
  throw new Error(`findFreePort: found no free port at or below ${maxPort} on ${HOST}`)
}

async function startOnPort(
  binary: string,
  port: number,
  dir: string,
  extraArgs: readonly string[],
): Promise<StartAttempt> {
  const args = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--dir',
    dir,
    ...extraArgs,
  ]
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const spawnFailed = new Promise<Error>((resolve) => child.on('error', resolve))
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
    // No pid means the spawn itself failed, and Node emits 'error' saying why.
    return { outcome: 'failed', error: describeSpawnFailure(binary, await spawnFailed) }
  }
  killOnParentExit(child, dir)

  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (hasExited()) {
      running.delete(child)
      // 'exit' can come before the last output is read, and that output says why it exited.
      await settlesWithin(outputClosed, 1_000)
      const status = child.exitCode !== null ? `code ${child.exitCode}` : `signal ${child.signalCode}`
      const error = new Error(`${binary} on ${HOST}:${port} exited with ${status} before answering PING:\n${output}`)
      return { outcome: output.includes('Address already in use') ? 'port-taken' : 'failed', error }
    }
    const answeringPid = await pingAndReadPid(port)
    if (answeringPid === pid) {
      return { outcome: 'ready', server: describeServer(child, pid, port, dir, exited, hasExited) }
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
    await delay(PROBE_INTERVAL_MS)
  }
  await stopChild(child, exited, hasExited)
  running.delete(child)
  return {
    outcome: 'failed',
    error: new Error(`${binary} on ${HOST}:${port} did not answer PING within ${READY_TIMEOUT_MS} ms:\n${output}`),
  }
}

function describeSpawnFailure(binary: string, error: NodeJS.ErrnoException): Error {
  if (error.code === 'ENOENT') {
    return new Error(`${binary} was not found on PATH (Debian: apt-get install redis-server)`, { cause: error })
  }
  return new Error(`${binary} could not be started: ${error.message}`, { cause: error })
}

/** The pid of the server that answered PING on the port, so a server that is not ours is noticed. */
async function pingAndReadPid(port: number): Promise<number | undefined> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: PROBE_CONNECT_TIMEOUT_MS,
  })
  // Refused connections are the expected answer until the server listens.
  client.on('error', () => {})
  try {
    await client.connect()
    if ((await client.ping()) !== 'PONG') return undefined
    const info = await client.info('server')
    const match = /^process_id:(\d+)/m.exec(info)
    return match?.[1] === undefined ? undefined : Number(match[1])
  } catch {
    return undefined
  } finally {
    client.disconnect()
  }
}

function describeServer(
  child: ChildProcess,
  pid: number,
  port: number,
  dir: string,
  exited: Promise<void>,
  hasExited: () => boolean,
): SpawnedRedis {
  let stopping: Promise<void> | undefined
  return {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
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
  // A server paused by kill('SIGSTOP') acts on SIGTERM only once it runs again.
  child.kill('SIGCONT')
  if (await settlesWithin(exited, STOP_GRACE_MS)) return
  child.kill('SIGKILL')
  if (await settlesWithin(exited, STOP_GRACE_MS)) return
  throw new Error(`redis-server pid ${child.pid} did not exit ${STOP_GRACE_MS} ms after SIGKILL`)
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
  if (exitHooksInstalled) return
  exitHooksInstalled = true
  process.on('exit', killRunning)
  // A signal ends Node without 'exit'. Once this listener has run (and removed itself), re-raising
  // the signal keeps Node's default of terminating, unless another listener handles it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killRunning()
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    })
  }
}

// Must stay synchronous because it runs inside 'exit', hence SIGKILL without waiting and rmSync.
function killRunning(): void {
  for (const [child, dir] of running) {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  running.clear()
}
