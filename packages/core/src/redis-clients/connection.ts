/** A script as Redis runs it: its text and its SHA1, as `scripts/generated.ts` holds them. */
export interface ScriptSource {
  readonly lua: string
  readonly sha1: string
}

/** One call of a script: the number of keys, the keys, then the arguments; the reply as Redis gave it. */
export type ScriptCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>

/** What a channel's subscription tells its owner. */
export interface ChannelListener {
  message(text: string): void
  /** The subscription is in place, or in place again after a reconnection: what was published meanwhile went unheard. */
  subscribed(): void
  failed(error: Error): void
}

/**
 * What Tollgate asks of a Redis client. Scripts go by EVALSHA, and by EVAL only when Redis
 * answers NOSCRIPT, so that they survive SCRIPT FLUSH, restarts and failovers without a retry on
 * any other error. Every command goes to a master.
 */
export interface RedisConnection {
  /** A Redis Cluster client: calls are grouped by slot, and each master is watched alone. */
  readonly cluster: boolean
  script(source: ScriptSource): ScriptCommand
  get(key: string): Promise<string | null>
  exists(key: string): Promise<number>
  lrange(key: string, start: number, stop: number): Promise<string[]>
  /**
   * Sends `commands` together, in order, each as its words with its key second
   * (`['HINCRBY', key, field, '1']`); all keys in one Cluster slot. Resolves once they were all
   * answered, whatever each answered; rejects when they could not be sent.
   */
  pipeline(commands: ReadonlyArray<readonly string[]>): Promise<void>
  /** The master serving `slot` (`host:port`) as the client last learned it; undefined while it knows none, and off a Cluster. */
  masterOfSlot(slot: number): string | undefined
  /**
   * Calls `listener` with each error the client reports (a refused AUTH, a lost connection):
   * both libraries report such errors as events while the commands waiting meanwhile only time
   * out. Returns the function that stops listening.
   */
  onError(listener: (error: Error) => void): () => void
  /** Calls `listener` whenever the client connects again (a Cluster: to any node). Returns the function that stops. */
  onReconnection(listener: () => void): () => void
  /**
   * Subscribes to `channel` on a connection of its own, opened from the client's options;
   * returns the function that closes it. Undefined when the client cannot open one.
   */
  readonly subscribe: ((channel: string, listener: ChannelListener) => () => void) | undefined
  /** Closes the client once the replies to the commands already sent are in; a client closed already, or never connected, is left as it is. */
  close(): Promise<void>
}
