import { describeValue, TollgateConfigError } from '../support/errors.js'
import type { RedisConnection } from './connection.js'
import { IoredisConnection, type RedisClientLike } from './ioredis.js'
import { type NodeRedisClientLike, NodeRedisConnection } from './node-redis.js'

const connections = new WeakMap<object, RedisConnection>()

/**
 * The connection over `client`, told apart by what the object offers: `defineCommand` for
 * ioredis (and iovalkey), `sendCommand` and `isOpen` for node-redis. One per client, so that
 * everything on one client shares its listeners and scripts. Throws TG_CONFIG naming `option`
 * for anything else.
 */
export function connectionOf(client: unknown, option: string): RedisConnection {
  if (client !== null && typeof client === 'object') {
    const known = connections.get(client)
    if (known !== undefined) return known
    const made = madeFor(client)
    if (made !== undefined) {
      connections.set(client, made)
      return made
    }
  }
  throw new TollgateConfigError(
    `${option} must be an ioredis (or iovalkey) Redis or Cluster client, or a node-redis client (createClient, createCluster or createSentinel), got ${describeValue(client)}`,
  )
}

function madeFor(client: object): RedisConnection | undefined {
  const offered = client as Partial<Record<'defineCommand' | 'sendCommand', unknown>> & { isOpen?: unknown }
  if (typeof offered.defineCommand === 'function') return new IoredisConnection(client as RedisClientLike)
  if (typeof offered.sendCommand === 'function' && typeof offered.isOpen === 'boolean') {
    return new NodeRedisConnection(client as NodeRedisClientLike)
  }
  return undefined
}
