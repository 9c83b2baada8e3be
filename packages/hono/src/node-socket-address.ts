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
