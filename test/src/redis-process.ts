import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { findFreePort } from './free-port.js'
import { cancelKillOnParentExit, killOnParentExit } from './orphan-cleanup.js'
import { HOST } from './redis-host.js'
import { withNode } from './redis-one-off-connection.js'

export interface SpawnRedisProcessOptions {
  /** The executable, looked up on PATH unless it is a path. */
  binary: string
  /** Named in the error when the binary is not found. */
  debianPackage: string
  /** The start of the name of the temporary directory, which becomes the process's `--dir`. */
  dirPrefix: string
  /**
   * Written to a file in the temporary directory whose path goes first on the command line, ahead of
   * the defaults: redis-sentinel accepts a config file only there, and rewrites it as it learns the topology.
   */
  configFile?: string
  /** Placed after the defaults; Redis lets a later argument override an earlier one. */
  args?: readonly string[]
  /** @default 65535 */
  maxPort?: number
  /** A fixed port, e.g. to restart a server where its clients expect it; no other port is tried. */
  port?: number
}

export interface SpawnedRedisProcess {
  port: number
  pid: number
  /**
   * SIGTERM, then SIGKILL if the process is still running 5 s later; resolves once it has exited
   * and its directory is removed. Calling it again returns the same promise.
   */
  stop(): Promise<void>
  /**
   * Sends a signal and returns at once, e.g. SIGKILL to simulate a crash or SIGSTOP to simulate a
   * process that hangs. Call stop() afterwards to remove the directory.
   * @default 'SIGKILL'
   */
  kill(signal?: NodeJS.Signals): void
}

type StartAttempt =
  | { outcome: 'ready'; process: SpawnedRedisProcess }
  | { outcome: 'port-taken'; error: Error }
  | { outcome: 'failed'; error: Error }

const CONFIG_FILE_NAME = 'redis.conf'
const READY_TIMEOUT_MS = 10_000
const PROBE_INTERVAL_MS = 20
const PROBE_TIMEOUT_MS = 2_000
const STOP_GRACE_MS = 5_000
const PORT_ATTEMPTS = 5
const FREE_PORT_ATTEMPTS = 50
const OUTPUT_TAIL_CHARS = 4_000
const MAX_PORT = 65_535

/**
 * Starts the binary on a free port of 127.0.0.1 with a temporary directory of its own, and resolves
 * once the process answers PING with its own pid. Picks another port when one is taken meanwhile.
 */
export async function spawnRedisProcess(options: SpawnRedisProcessOptions): Promise<SpawnedRedisProcess> {
  let lastPortError: Error | undefined
  for (let attempt = 0; attempt < (options.port === undefined ? PORT_ATTEMPTS : 1); attempt++) {
    const port = options.port ?? (await findFreePortAtMost(options.maxPort ?? MAX_PORT))
    const dir = await mkdtemp(join(tmpdir(), options.dirPrefix))
    const started = await startOnPort(options, port, dir)
    if (started.outcome === 'ready') return started.process
    await rm(dir, { recursive: true, force: true })
    if (started.outcome === 'failed') throw started.error
    lastPortError = started.error
  }
  throw new Error(
    `${options.binary}: another process took the chosen port ${PORT_ATTEMPTS} times in a row; giving up`,
    {
      cause: lastPortError,
    },
  )
}

async function findFreePortAtMost(maxPort: number): Promise<number> {
  // Linux hands out ports up to 60999, so a limit such as a cluster node's rules out about one in five.
  for (let attempt = 0; attempt < FREE_PORT_ATTEMPTS; attempt++) {
    const port = await findFreePort()
    if (port <= maxPort) return port
  }
  throw new Error(`findFreePort: found no free port at or below ${maxPort} on ${HOST}`)
}

async function commandLine(options: SpawnRedisProcessOptions, port: number, dir: string): Promise<string[]> {
  const leading: string[] = []
  if (options.configFile !== undefined) {
    const configPath = join(dir, CONFIG_FILE_NAME)
    await writeFile(configPath, options.configFile)
    leading.push(configPath)
  }
  const defaults = [
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
  ]
  return [...leading, ...defaults, ...(options.args ?? [])]
}

async function startOnPort(options: SpawnRedisProcessOptions, port: number, dir: string): Promise<StartAttempt> {
  const { binary } = options
  const child = spawn(binary, await commandLine(options, port, dir), { stdio: ['ignore', 'pipe', 'pipe'] })
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
    // No pid means the spawn itself failed, and Node emits 'error' saying why.
    return { outcome: 'failed', error: describeSpawnFailure(options, await spawnFailed) }
  }
  killOnParentExit(child, dir)

  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (hasExited()) {
      cancelKillOnParentExit(child)
      // 'exit' can come before the last output is read, and that output says why it exited.
      await settlesWithin(outputClosed, 1_000)
      const status = child.exitCode !== null ? `code ${child.exitCode}` : `signal ${child.signalCode}`
      const error = new Error(`${binary} on ${HOST}:${port} exited with ${status} before answering PING:\n${output}`)
      return { outcome: output.includes('Address already in use') ? 'port-taken' : 'failed', error }
    }
    const answeringPid = await pingAndReadPid(port)
    if (answeringPid === pid) {
      return { outcome: 'ready', process: describeProcess(child, pid, port, dir, exited, hasExited) }
    }
    if (answeringPid !== undefined) {
      // Another process got the port first; ours will fail to bind and exit.
      await stopChild(child, exited, hasExited)
      cancelKillOnParentExit(child)
      return {
        outcome: 'port-taken',
        error: new Error(`${HOST}:${port} is served by pid ${answeringPid}, not by the spawned pid ${pid}`),
      }
    }
    await delay(PROBE_INTERVAL_MS)
  }
  await stopChild(child, exited, hasExited)
  cancelKillOnParentExit(child)
  return {
    outcome: 'failed',
    error: new Error(`${binary} on ${HOST}:${port} did not answer PING within ${READY_TIMEOUT_MS} ms:\n${output}`),
  }
}

function describeSpawnFailure(options: SpawnRedisProcessOptions, error: NodeJS.ErrnoException): Error {
  if (error.code === 'ENOENT') {
    const hint = `Debian: apt-get install ${options.debianPackage}`
    return new Error(`${options.binary} was not found on PATH (${hint})`, { cause: error })
  }
  return new Error(`${options.binary} could not be started: ${error.message}`, { cause: error })
}

/** The pid of the process that answered PING on the port, so a process that is not ours is noticed. */
async function pingAndReadPid(port: number): Promise<number | undefined> {
  try {
    return await withNode(
      port,
      async (client) => {
        if ((await client.ping()) !== 'PONG') return undefined
        const match = /^process_id:(\d+)/m.exec(await client.info('server'))
        return match?.[1] === undefined ? undefined : Number(match[1])
      },
      PROBE_TIMEOUT_MS,
    )
  } catch {
    // Refused connections are the expected answer until the process listens.
    return undefined
  }
}

function describeProcess(
  child: ChildProcess,
  pid: number,
  port: number,
  dir: string,
  exited: Promise<void>,
  hasExited: () => boolean,
): SpawnedRedisProcess {
  let stopping: Promise<void> | undefined
  return {
    port,
    pid,
    stop() {
      stopping ??= (async () => {
        await stopChild(child, exited, hasExited)
        cancelKillOnParentExit(child)
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
  // A process paused by kill('SIGSTOP') acts on SIGTERM only once it runs again.
  child.kill('SIGCONT')
  if (await settlesWithin(exited, STOP_GRACE_MS)) return
  child.kill('SIGKILL')
  if (await settlesWithin(exited, STOP_GRACE_MS)) return
  throw new Error(`${child.spawnfile} pid ${child.pid} did not exit ${STOP_GRACE_MS} ms after SIGKILL`)
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
