/** Which peers are proxies whose `X-Forwarded-For` is believed: all (`true`), none (`false`), or those a function returns true for. */
export type TrustProxy = boolean | ((address: string) => boolean)

/**
 * The client address, as Express's `trust proxy` finds it, for adapters of frameworks that leave
 * it to them (Hono): from the connecting peer leftwards through `X-Forwarded-For`, the first
 * address not trusted as a proxy, or the header's first address when all are.
 * @example forwardedClientAddress('10.0.0.1', '203.0.113.7, 10.0.0.2', (a) => a.startsWith('10.')) // '203.0.113.7'
 */
export function forwardedClientAddress(
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
