import { HOST } from './redis-host.js'
import { type SpawnedRedisProcess, spawnRedisProcess } from './redis-process.js'

export interface SpawnRedisServerOptions {
  /** A fixed port, to restart a killed server where its clients will reconnect. @default a free one */
  port?: number
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

export interface SpawnedRedis extends SpawnedRedisProcess {
  host: '127.0.0.1'
  /** @example 'redis://127.0.0.1:41234' */
  url: string
}

// The cluster bus listens on port + 10000, and redis-server refuses a port that leaves no room for it.
const MAX_CLUSTER_NODE_PORT = 55_535

export async function spawnRedisServer(options: SpawnRedisServerOptions = {}): Promise<SpawnedRedis> {
  const args = options.args ?? []
  const server = await spawnRedisProcess({
    binary: options.binary ?? 'redis-server',
    debianPackage: 'redis-server',
    dirPrefix: 'tollgate-redis-',
    args,
    maxPort: isClusterNode(args) ? MAX_CLUSTER_NODE_PORT : undefined,
    port: options.port,
  })
  return { ...server, host: HOST, url: `redis://${HOST}:${server.port}` }
}

function isClusterNode(args: readonly string[]): boolean {
  const index = args.indexOf('--cluster-enabled')
  return index !== -1 && args[index + 1] === 'yes'
}
