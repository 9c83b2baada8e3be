/** `true` trusts every peer as a proxy; a function trusts the addresses it returns true for. */
export type TrustProxy = boolean | ((address: string) => boolean)

/**
 * The client address, as Express's `trust proxy` finds it: from the peer leftwards through
 * `X-Forwarded-For`, the first address not trusted as a proxy, or the header's first address when
 * all are.
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trust: TrustProxy,
): string | undefined {
  if (trust === false || forwardedFor === undefined) return peer
  const hops = forwardedFor.split(',')
  let address = peer
  for (let hop = hops.length - 1; hop >= 0; hop--) {
    if (trust !== true && (address === undefined || !trust(address))) return address
    address = hops[hop]?.trim()
  }
  return address
}

interface NodeBindings {
  incoming?: { socket?: { remoteAddress?: string } }
  server?: NodeBindings
}

/**
 * The peer's address on @hono/node-server, read from its bindings as its own `getConnInfo` reads
 * them, without importing it: that module is Node's alone. Undefined on every other runtime.
 */
export function nodeSocketAddress(c: { env: unknown }): string | undefined {
  const bindings = c.env as NodeBindings | undefined
  return (bindings?.server ?? bindings)?.incoming?.socket?.remoteAddress
}
