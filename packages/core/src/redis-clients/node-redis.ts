import { TollgateError } from '../support/errors.js'
import { listenTo } from './client-events.js'
import type { ChannelListener, RedisConnection, ScriptCommand, ScriptSource } from './connection.js'
import { isNoScript, isReplyError } from './reply-errors.js'

/**
 * A node-redis client (`redis` v4 to v6): `createClient()`, `createCluster()` or
 * `createSentinel()`, connected by its owner (`await client.connect()`) before the first
 * decision. `sendCommand` and `isOpen` tell it apart from an ioredis client.
 */
export interface NodeRedisClientLike {
  sendCommand(...args: never[]): Promise<unknown>
  readonly isOpen: boolean
}

type Args = readonly string[]

/** How each kind of node-redis client takes a raw command, and the part each offers beyond it. */
interface NodeRedis extends NodeRedisClientLike {
  duplicate?(): NodeRedisSubscriber
  /** v5 and later: QUIT once the replies are in. */
  close?(): Promise<void>
  /** v4: the same. */
  quit?(): Promise<unknown>
}

/** `createClient()`: `sendCommand(args)`. */
interface Standalone extends NodeRedis {
  sendCommand(args: Args): Promise<unknown>
}

/** `createCluster()`: `sendCommand(firstKey, isReadonly, args)`, routed by its first key. */
interface Cluster extends NodeRedis {
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: Args): Promise<unknown>
  getSlotMaster(slot: number): { readonly address?: string } | undefined
}

/** `createSentinel()` (v5 and later): `sendCommand(isReadonly, args)`, always to the master it follows. */
interface Sentinel extends NodeRedis {
  sendCommand(isReadonly: boolean, args: Args): Promise<unknown>
  getSentinelNode(): unknown
}

interface NodeRedisSubscriber {
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'ready', listener: () => void): unknown
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>
  /** v5 and later; v4 has disconnect(). */
  destroy?(): unknown
  disconnect?(): Promise<unknown>
}

/** Errors: the client's own, and a Cluster node's. Reconnections: `ready`, and `node-ready` for a Cluster node. */
const ERROR_EVENTS = ['error', 'node-error'] as const
const RECONNECTION_EVENTS = ['ready', 'node-ready'] as const

/**
 * Commands as raw arguments, which every node-redis version from 4 takes alike; scripts by
 * EVALSHA, and by EVAL when Redis answers NOSCRIPT. A client not open fails the call at once,
 * naming the cause, where node-redis would say only that "the client is closed".
 */
export class NodeRedisConnection implements RedisConnection {
  readonly cluster: boolean
  readonly subscribe: RedisConnection['subscribe']
  private readonly send: (key: string | undefined, args: Args) => Promise<unknown>

  constructor(private readonly client: NodeRedisClientLike) {
    this.cluster = typeof (client as Partial<Cluster>).getSlotMaster === 'function'
    if (this.cluster) {
      const cluster = client as Cluster
      this.send = (key, args) => cluster.sendCommand(key, false, args)
    } else if (typeof (client as Partial<Sentinel>).getSentinelNode === 'function') {
      const sentinel = client as Sentinel
      this.send = (_key, args) => sentinel.sendCommand(false, args)
    } else {
      const standalone = client as Standalone
      this.send = (_key, args) => standalone.sendCommand(args)
    }
    this.subscribe = typeof (client as NodeRedis).duplicate === 'function' ? this.subscribeOnDuplicate : undefined
  }

  script(source: ScriptSource): ScriptCommand {
    const { sha1, lua } = source
    return async (numberOfKeys, ...keysAndArgs) => {
      const key = numberOfKeys > 0 ? keysAndArgs[0] : undefined
      const count = String(numberOfKeys)
      try {
        return await this.command(key, ['EVALSHA', sha1, count, ...keysAndArgs])
      } catch (error) {
        if (!isNoScript(error)) throw error
        return this.command(key, ['EVAL', lua, count, ...keysAndArgs])
      }
    }
  }

  get(key: string): Promise<string | null> {
    return this.command(key, ['GET', key]) as Promise<string | null>
  }

  exists(key: string): Promise<number> {
    return this.command(key, ['EXISTS', key]) as Promise<number>
  }

  lrange(key: string, start: number, stop: number): Promise<string[]> {
    return this.command(key, ['LRANGE', key, String(start), String(stop)]) as Promise<string[]>
  }

  /** node-redis writes the commands of one turn of the event loop together: a pipeline without asking. */
  async pipeline(commands: ReadonlyArray<readonly string[]>): Promise<void> {
    const settled = await Promise.allSettled(commands.map((command) => this.command(command[1], command)))
    // Whatever each answered, as an ioredis pipeline resolves; a command that was never answered fails the whole.
    for (const outcome of settled)
      if (outcome.status === 'rejected' && !isReplyError(outcome.reason)) throw outcome.reason
  }

  masterOfSlot(slot: number): string | undefined {
    if (!this.cluster) return undefined
    try {
      return (this.client as Cluster).getSlotMaster(slot)?.address
    } catch {
      // Before its first slot map a Cluster client knows no master.
      return undefined
    }
  }

  onError(listener: (error: Error) => void): () => void {
    return listenTo(this.client, ERROR_EVENTS, listener)
  }

  onReconnection(listener: () => void): () => void {
    return listenTo(this.client, RECONNECTION_EVENTS, listener)
  }

  async close(): Promise<void> {
    const client = this.client as NodeRedis
    if (!client.isOpen) return
    try {
      if (typeof client.close === 'function') await client.close()
      else await client.quit?.()
    } catch {
      // Closed meanwhile by another owner, or a server that is down: nothing is left open to end.
    }
  }

  private command(key: string | undefined, args: Args): Promise<unknown> {
    if (!this.client.isOpen) {
      return Promise.reject(
        new TollgateError(
          'TG_STORE',
          'the node-redis client is not open: connect it (await client.connect()) before the first decision',
          { storeDown: true },
        ),
      )
    }
    return this.send(key, args)
  }

  private readonly subscribeOnDuplicate = (channel: string, listener: ChannelListener): (() => void) => {
    const subscriber = ((this.client as NodeRedis).duplicate as () => NodeRedisSubscriber).call(this.client)
    let closed = false
    subscriber.on('error', (error) => listener.failed(error))
    // node-redis subscribes again by itself on every reconnection; 'ready' says it connected again.
    subscriber.on('ready', () => listener.subscribed())
    subscriber
      .connect()
      .then(() => subscriber.subscribe(channel, (message) => listener.message(message)))
      .then(
        () => listener.subscribed(),
        (error: unknown) => {
          if (!closed) listener.failed(error instanceof Error ? error : new Error(String(error)))
        },
      )
    return () => {
      closed = true
      if (typeof subscriber.destroy === 'function') subscriber.destroy()
      else subscriber.disconnect?.().catch(() => {})
    }
  }
}
