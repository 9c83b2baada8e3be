import type { RedisConnection } from '../redis-clients/connection.js'

const heardByConnection = new WeakMap<RedisConnection, { readonly heard: Set<() => void>; readonly stop: () => void }>()

/**
 * Calls `heard` whenever the client connects again: after a failover, say, when the server it
 * reaches may not hold what the one before held. One listener per client, however many live
 * rules share the client, so that they do not pile up on it. Returns the function that stops.
 */
export function onReconnection(connection: RedisConnection, heard: () => void): () => void {
  let entry = heardByConnection.get(connection)
  if (entry === undefined) {
    const all = new Set<() => void>()
    const stop = connection.onReconnection(() => {
      for (const each of [...all]) each()
    })
    entry = { heard: all, stop }
    heardByConnection.set(connection, entry)
  }
  const { heard: all, stop } = entry
  all.add(heard)
  return () => {
    if (!all.delete(heard) || all.size > 0) return
    stop()
    heardByConnection.delete(connection)
  }
}
