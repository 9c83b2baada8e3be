/** An event emitter as both libraries' clients are: `on` and `off`, which a test's stand-in may lack. */
interface Emitter {
  on?(event: string, listener: (...args: never[]) => void): unknown
  off?(event: string, listener: (...args: never[]) => void): unknown
}

/**
 * Calls `listener` on each of `events` of `client`; returns the function that stops. A client
 * without `on` and `off` is never heard.
 */
export function listenTo(client: object, events: readonly string[], listener: (...args: never[]) => void): () => void {
  const emitter = client as Emitter
  if (typeof emitter.on !== 'function' || typeof emitter.off !== 'function') return () => {}
  for (const event of events) emitter.on(event, listener)
  return () => {
    for (const event of events) emitter.off?.(event, listener)
  }
}
