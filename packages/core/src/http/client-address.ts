import { addressIdentifier } from '../identifiers/ip.js'
import { textDigest } from '../support/digest.js'

/** How an address that is not a plain IP address was read. */
export type AddressFallback = 'port-removed' | 'digest'

/**
 * `203.0.113.7:51234` or `[2001:db8::1]:443`: what some load balancers append to
 * `X-Forwarded-For`. A bare IPv6 address never matches, since it parses before this is tried.
 */
const WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}|\[[^\]]+\]):(\d{1,5})$/
const MAX_PORT = 65_535

/**
 * The identifier of the client address a framework reported, which a proxy may have filled with
 * anything: the address's own identifier when it parses; else the address without its port when
 * that parses; else `ip:#<digest>` of the text, so that the request is still counted, clients
 * sending the same text together. `onFallback` hears of the last two.
 */
export function clientAddressIdentifier(
  address: string,
  ipv6Subnet: number,
  onFallback: (how: AddressFallback) => void,
): string {
  const identifier = addressIdentifier(address, ipv6Subnet)
  if (identifier !== undefined) return identifier
  const [, host, port] = WITH_PORT.exec(address) ?? []
  const withoutPort = host === undefined || Number(port) > MAX_PORT ? undefined : addressIdentifier(host, ipv6Subnet)
  if (withoutPort !== undefined) {
    onFallback('port-removed')
    return withoutPort
  }
  onFallback('digest')
  return `ip:#${textDigest(address)}`
}
