import type { Cluster, Redis, RedisOptions } from 'ioredis'
import { CliError, messageOf } from './errors.js'
import { maskedUrls, type RedisTarget } from './redis-url.js'

export interface Connection {
  readonly client: Redis | Cluster
  /** True when the URL points to a Cluster node (`--cluster`, or found by `INFO cluster`). */
  readonly cluster: boolean
  /** The URL with its credentials masked, for messages. */
  readonly url: string
  close(): Promise<void>
}

/** How long to wait for a connection, and for any one command: an admin command should fail, not hang. */
export const CONNECT_TIMEOUT_MS = 5_000
const COMMAND_TIMEOUT_MS = 10_000

/**
 * Connects once, without retrying: a refused or unreachable server fails at once, with the
 * server's address and what the socket said. A standalone node that answers `cluster_enabled:1`
 * is reconnected to as a Cluster, unless `cluster` already said so.
 */
export async function connect(target: RedisTarget, cluster: boolean): Promise<Connection> {
  const options = optionsOf(target)
  // Loaded here, so that commands without Redis (validate, --help, usage errors) start in a third less time.
  const { Cluster, Redis } = await import('ioredis')
  if (!cluster) {
    const client = new Redis({ ...options, lazyConnect: true })
    await opened(client, target)
    let info: string
    try {
      info = await client.info('cluster')
    } catch (error) {
      dropped(client)
      throw unreachable(target, error)
    }
    if (!/^cluster_enabled:1\b/m.test(info)) {
      return { client, cluster: false, url: target.shown, close: () => closed(client) }
    }
    client.disconnect()
  }
  const { host, port, ...redisOptions } = options
  const client = new Cluster([{ host: host as string, port: port as number }], {
    redisOptions,
    lazyConnect: true,
    clusterRetryStrategy: () => null,
    // The ready check waits for cluster_state:ok, and on a Cluster missing a slot never settles:
    // doctor is there to say so, and a command on a slot not served fails on its own.
    enableReadyCheck: false,
  })
  await opened(client, target)
  return { client, cluster: true, url: target.shown, close: () => closed(client) }
}

function optionsOf(target: RedisTarget): RedisOptions {
  return {
    host: target.host,
    port: target.port,
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    db: target.db,
    ...(target.tls ? { tls: {} } : {}),
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  }
}

async function opened(client: Redis | Cluster, target: RedisTarget): Promise<void> {
  // What Redis said last, so that a failed connect can tell why (a refused AUTH, a TLS error).
  let last: unknown
  client.on('error', (error) => {
    last = error
  })
  try {
    await client.connect()
  } catch (error) {
    dropped(client)
    throw unreachable(target, last ?? error)
  }
}

/**
 * Disconnects unless already ended: ioredis arms a timer to destroy the socket on disconnect,
 * which a socket that already closed never clears, and which holds the process 2 s.
 */
function dropped(client: Redis | Cluster): void {
  if (client.status !== 'end') client.disconnect()
}

/** What the socket or the server said is quoted, without the credentials should it ever repeat them. */
function unreachable(target: RedisTarget, error: unknown): CliError {
  let said = maskedUrls(messageOf(error))
  for (const secret of target.secrets) said = said.replaceAll(secret, '***')
  return new CliError('TG_REDIS', `cannot reach Redis at ${target.shown}: ${said}`)
}

async function closed(client: Redis | Cluster): Promise<void> {
  try {
    await client.quit()
  } catch {
    dropped(client)
  }
}
