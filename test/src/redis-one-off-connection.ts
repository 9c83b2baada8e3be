import { Redis } from 'ioredis'
import { HOST } from './redis-host.js'

// Long enough for a batch of MIGRATE on a busy machine.
const DEFAULT_TIMEOUT_MS = 5_000

/**
 * Runs use on a short-lived connection to the port that fails fast instead of queueing or
 * reconnecting, so a probe of a node that is down or not up yet answers with an error at once.
 * timeoutMs bounds the connect and each command.
 */
export async function withNode<T>(
  port: number,
  use: (client: Redis) => Promise<T>,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<T> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
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
