import { listenTo } from './client-events.js'
import type { ChannelListener, RedisConnection, ScriptCommand, ScriptSource } from './connection.js'

/**
 * An ioredis client, `Redis` (standalone or Sentinel) or `Cluster`, or one of its fork iovalkey:
 * the part Tollgate's types name. `defineCommand` tells it apart from a node-redis client.
 */
export interface RedisClientLike {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  /** How the store hears what Redis said to the client; without `on` and `off` it does not listen. */
  on?(event: 'error' | 'node error', listener: (error: Error) => void): unknown
  off?(event: 'error' | 'node error', listener: (error: Error) => void): unknown
}

/** What an ioredis client offers beyond its type here, looked up when used. */
interface Ioredis extends RedisClientLike {
  readonly isCluster?: boolean
  /** A Cluster's slots: `slots[slot][0]` is the master's `host:port`. */
  readonly slots?: ReadonlyArray<readonly string[] | undefined>
  /** `wait` before a lazy client's first command, `end` once it is closed. */
  readonly status?: string
  get(key: string): Promise<string | null>
  exists(key: string): Promise<number>
  lrange(key: string, start: number, stop: number): Promise<string[]>
  pipeline(): { call(command: string, ...args: string[]): unknown; exec(): Promise<unknown> }
  duplicate?(): Subscriber
  /** Sends QUIT once the replies of the commands already sent are in, then ends the connection. */
  quit?(): Promise<unknown>
  disconnect?(): void
}

interface Subscriber {
  subscribe(channel: string): Promise<unknown>
  on(event: 'message', listener: (channel: string, message: string) => void): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'ready', listener: () => void): unknown
  disconnect(): void
}

/** Errors: a client's own ('error') and a Cluster node's ('node error'). Reconnections: `ready`, and `+node` for a Cluster node (a replica promoted). */
const ERROR_EVENTS = ['error', 'node error'] as const
const RECONNECTION_EVENTS = ['ready', '+node'] as const

/** Scripts through `defineCommand`: EVALSHA, falling back to EVAL only on NOSCRIPT. */
export class IoredisConnection implements RedisConnection {
  readonly cluster: boolean
  readonly subscribe: RedisConnection['subscribe']
  private readonly client: Ioredis

  constructor(client: RedisClientLike) {
    this.client = client as Ioredis
    this.cluster = this.client.isCluster === true
    this.subscribe = typeof this.client.duplicate === 'function' ? this.subscribeOnDuplicate : undefined
  }

  script(source: ScriptSource): ScriptCommand {
    const name = `tollgate${source.sha1}`
    const commands = this.client as unknown as Record<string, ScriptCommand | undefined>
    if (typeof commands[name] !== 'function') this.client.defineCommand(name, { lua: source.lua })
    return (commands[name] as ScriptCommand).bind(this.client)
  }

  get(key: string): Promise<string | null> {
    return this.client.get(key)
  }

  exists(key: string): Promise<number> {
    return this.client.exists(key)
  }

  lrange(key: string, start: number, stop: number): Promise<string[]> {
    return this.client.lrange(key, start, stop)
  }

  async pipeline(commands: ReadonlyArray<readonly string[]>): Promise<void> {
    const pipeline = this.client.pipeline()
    for (const [command, ...args] of commands) pipeline.call(command as string, ...args)
    await pipeline.exec()
  }

  masterOfSlot(slot: number): string | undefined {
    return this.cluster ? this.client.slots?.[slot]?.[0] : undefined
  }

  onError(listener: (error: Error) => void): () => void {
    return listenTo(this.client, ERROR_EVENTS, listener)
  }

  onReconnection(listener: () => void): () => void {
    return listenTo(this.client, RECONNECTION_EVENTS, listener)
  }

  async close(): Promise<void> {
    const { client } = this
    // Ended already: closed by another owner (a store and LiveRules both told to close one client).
    if (client.status === 'end') return
    // Never connected (lazyConnect): QUIT would connect only to close.
    if (client.status === 'wait' && typeof client.disconnect === 'function') {
      client.disconnect()
      return
    }
    try {
      await client.quit?.()
    } catch {
      // QUIT cannot reach a server that is down; disconnect() still stops the reconnection timer.
      client.disconnect?.()
    }
  }

  private readonly subscribeOnDuplicate = (channel: string, listener: ChannelListener): (() => void) => {
    const subscriber = (this.client.duplicate as () => Subscriber).call(this.client)
    subscriber.on('error', (error) => listener.failed(error))
    subscriber.on('message', (from, message) => {
      if (from === channel) listener.message(message)
    })
    // ioredis subscribes again by itself on every reconnection, then emits 'ready'.
    subscriber.on('ready', () => listener.subscribed())
    subscriber.subscribe(channel).then(
      () => listener.subscribed(),
      (error: unknown) => listener.failed(error instanceof Error ? error : new Error(String(error))),
    )
    return () => subscriber.disconnect()
  }
}
