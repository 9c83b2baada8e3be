/**
 * The part of an ioredis `Redis` or `Cluster` client this store uses. ioredis' `defineCommand`
 * sends EVALSHA and falls back to EVAL only on NOSCRIPT, so scripts survive SCRIPT FLUSH,
 * restarts and failovers without a retry on any other error.
 */
export interface RedisClientLike {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  /** How the store hears what Redis said to the client; without `on` and `off` it does not listen. */
  on?(event: 'error' | 'node error', listener: (error: Error) => void): unknown
  off?(event: 'error' | 'node error', listener: (error: Error) => void): unknown
}
