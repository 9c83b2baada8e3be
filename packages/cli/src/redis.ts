import type { Cluster, Redis, RedisOptions } from 'ioredis'
import { CliError, messageOf, usageError } from './errors.js'

export interface Connection {
  readonly client: Redis | Cluster
  /** True when the URL points to a Cluster node (`--cluster`, or found by `INFO cluster`). */
  readonly cluster: boolean
  /** The URL without its password, for messages. */
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
export async function connect(url: string, cluster: boolean): Promise<Connection> {
  const options = optionsOf(url)
  // Loaded here, so that commands without Redis (validate, --help, usage errors) start in a third less time.
  const { Cluster, Redis } = await import('ioredis')
  const shown = redacted(url)
  if (!cluster) {
    const client = new Redis({ ...options, lazyConnect: true })
    await opened(client, shown)
    let info: string
    try {
      info = await client.info('cluster')
    } catch (error) {
      dropped(client)
      throw unreachable(shown, error)
    }
    if (!/^cluster_enabled:1\b/m.test(info)) return { client, cluster: false, url: shown, close: () => closed(client) }
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
  await opened(client, shown)
  return { client, cluster: true, url: shown, close: () => closed(client) }
}

function optionsOf(url: string): RedisOptions {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw usageError(`--redis must be a redis:// or rediss:// URL, got ${JSON.stringify(redacted(url))}`)
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw usageError(`--redis must be a redis:// or rediss:// URL, got ${JSON.stringify(redacted(url))}`)
  }
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : 0
  if (!Number.isSafeInteger(db) || db < 0) {
    throw usageError(`--redis: the database in the URL's path must be a number, got ${JSON.stringify(parsed.pathname)}`)
  }
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    port: parsed.port === '' ? 6379 : Number(parsed.port),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    db,
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  }
}

async function opened(client: Redis | Cluster, url: string): Promise<void> {
  // What Redis said last, so that a failed connect can tell why (a refused AUTH, a TLS error).
  let last: unknown
  client.on('error', (error) => {
    last = error
  })
  try {
    await client.connect()
  } catch (error) {
    dropped(client)
    throw unreachable(url, last ?? error)
  }
}

/**
 * Disconnects unless already ended: ioredis arms a timer to destroy the socket on disconnect,
 * which a socket that already closed never clears, and which holds the process 2 s.
 */
function dropped(client: Redis | Cluster): void {
  if (client.status !== 'end') client.disconnect()
}

function unreachable(url: string, error: unknown): CliError {
  return new CliError('TG_REDIS', `cannot reach Redis at ${url}: ${messageOf(error)}`)
}

async function closed(client: Redis | Cluster): Promise<void> {
  try {
    await client.quit()
  } catch {
    dropped(client)
  }
}

export function redacted(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return url
  }
}
