/** What an ioredis client emits when it connects again: `ready` (a `Redis`), `+node` (a `Cluster` connecting to a node, such as a replica promoted). */
const EVENTS = ['ready', '+node'] as const

interface Emitter {
  on(event: string, listener: () => void): unknown
  off(event: string, listener: () => void): unknown
}

const heardByClient = new WeakMap<object, { readonly heard: Set<() => void>; readonly fire: () => void }>()

/**
 * Calls `heard` whenever `client` connects again: after a failover, say, when the server it
 * reaches may not hold what the one before held. One listener per client and event, however many
 * live rules share the client, so that they do not pile up on it. Returns the function that stops;
 * a client that emits no events is never heard.
 */
export function onReconnection(client: unknown, heard: () => void): () => void {
  const emitter = client as Partial<Emitter> | null
  if (typeof emitter?.on !== 'function' || typeof emitter.off !== 'function') return () => {}
  const target = emitter as Emitter
  let entry = heardByClient.get(target)
  if (entry === undefined) {
    const all = new Set<() => void>()
    const fire = () => {
      for (const each of [...all]) each()
    }
    for (const event of EVENTS) target.on(event, fire)
    entry = { heard: all, fire }
    heardByClient.set(target, entry)
  }
  const { heard: all, fire } = entry
  all.add(heard)
  return () => {
    if (!all.delete(heard) || all.size > 0) return
    for (const event of EVENTS) target.off(event, fire)
    heardByClient.delete(target)
  }
}
