import { describeValue, TollgateArgumentError, TollgateConfigError } from '../support/errors.js'

export interface IpIdentifierOptions {
  /**
   * How many leading bits of an IPv6 address identify one client. Providers hand a subscriber a
   * whole prefix (commonly a /56 or /48) and devices rotate through it, so keying on the full
   * address would let one client multiply its quota. `128` keys on the exact address.
   * IPv4 and IPv4-mapped IPv6 addresses are always keyed on the exact address.
   * @default 56
   * @example { ipv6Subnet: 64 }
   */
  ipv6Subnet?: number
}

const DEFAULT_IPV6_SUBNET = 56

const COLON = 0x3a
const DOT = 0x2e
const DIGIT_0 = 0x30
const DIGIT_9 = 0x39
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

// RFC 4007 and RFC 6874: a zone index is not empty and, in a URI, made of unreserved characters
// (`%25eth0` passes as the zone `25eth0`). It is dropped, but checking it keeps arbitrary text
// from riding along after a `%`.
const ZONE_INDEX = /^[A-Za-z0-9._~-]+$/

// A server listening on `::` (what Node does by default where IPv6 is available) reports every
// IPv4 client in this form, so it gets a fast path next to plain IPv4.
const MAPPED_IPV4_PREFIX = '::ffff:'

// Number#toString(16) is the slowest step of formatting; eight lookups per address are cheaper.
const HEX_BYTE = Array.from({ length: 256 }, (_, byte) => byte.toString(16))
const HEX_BYTE_PADDED = HEX_BYTE.map((digits) => digits.padStart(2, '0'))

// Reused across calls (parsing is synchronous) so that the per-request path allocates little more
// than its result.
const groups = new Uint16Array(8)

/**
 * The rate-limit identifier of a client address: `'ip:<IPv4>'`, or `'ip:<IPv6 network>/<prefix>'`.
 * IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) give the same identifier as the plain IPv4
 * address, since dual-stack servers report IPv4 clients in that form. IPv6 networks are written in
 * RFC 5952 form, so every spelling of one network gives one identifier. Surrounding brackets and
 * a zone index (`%eth0`) are accepted and dropped; surrounding whitespace is not.
 *
 * @param address The client address as the server reports it, e.g. `req.socket.remoteAddress`.
 * @param options `ipv6Subnet` (default `56`): the IPv6 prefix length that identifies one client.
 * @throws {TollgateConfigError} `ipv6Subnet` is not an integer from 1 to 128 (checked first).
 * @throws {TollgateArgumentError} `address` is not an IPv4 or IPv6 address.
 * @example
 * ipIdentifier('203.0.113.7') // 'ip:203.0.113.7'
 * ipIdentifier('::ffff:203.0.113.7') // 'ip:203.0.113.7'
 * ipIdentifier('2001:db8:1234:56ab:1:2:3:4') // 'ip:2001:db8:1234:5600::/56'
 * ipIdentifier('2001:db8:1234:56ab:1:2:3:4', { ipv6Subnet: 64 }) // 'ip:2001:db8:1234:56ab::/64'
 */
export function ipIdentifier(address: string, options?: IpIdentifierOptions): string {
  const prefix = resolveIpv6Subnet(options)
  if (typeof address !== 'string') throw invalidAddress(address)
  const identifier = addressIdentifier(address, prefix)
  if (identifier === undefined) throw invalidAddress(address)
  return identifier
}

/** `ipIdentifier` with a prefix already checked: undefined, not an error, when `address` is no IP address. */
export function addressIdentifier(address: string, prefix: number): string | undefined {
  if (parseIpv4(address, 0, address.length) >= 0) return `ip:${address}`
  if (address.startsWith(MAPPED_IPV4_PREFIX) && parseIpv4(address, MAPPED_IPV4_PREFIX.length, address.length) >= 0) {
    return `ip:${address.slice(MAPPED_IPV4_PREFIX.length)}`
  }

  let start = 0
  let end = address.length
  if (address.charCodeAt(0) === OPEN_BRACKET && address.charCodeAt(end - 1) === CLOSE_BRACKET) {
    start = 1
    end -= 1
  }
  const zone = address.indexOf('%', start)
  if (zone >= 0 && zone < end) {
    if (!ZONE_INDEX.test(address.slice(zone + 1, end))) return undefined
    end = zone
  }
  if (!parseIpv6(address, start, end)) return undefined

  if (isIpv4Mapped()) {
    const high = groups[6] as number
    const low = groups[7] as number
    return `ip:${high >>> 8}.${high & 0xff}.${low >>> 8}.${low & 0xff}`
  }
  maskGroups(prefix)
  return `ip:${formatIpv6()}/${prefix}`
}

function resolveIpv6Subnet(options: IpIdentifierOptions | undefined): number {
  if (options === undefined) return DEFAULT_IPV6_SUBNET
  if (typeof options !== 'object' || options === null) {
    throw new TollgateConfigError(`ipIdentifier: options must be an object, got ${describeValue(options)}`)
  }
  const subnet = options.ipv6Subnet
  if (subnet === undefined) return DEFAULT_IPV6_SUBNET
  if (!Number.isInteger(subnet) || subnet < 1 || subnet > 128) {
    throw new TollgateConfigError(
      `ipIdentifier: option ipv6Subnet must be an integer from 1 to 128, got ${describeValue(subnet)}`,
    )
  }
  return subnet
}

function invalidAddress(address: unknown): TollgateArgumentError {
  return new TollgateArgumentError(`ipIdentifier: ${describeValue(address)} is not an IPv4 or IPv6 address`)
}

/**
 * Reads a canonical dotted quad from `text[start, end)` as an unsigned 32-bit value, or returns -1.
 * Leading zeros are refused because some parsers read them as octal: `010.0.0.1` would name
 * two different hosts depending on who reads it.
 */
function parseIpv4(text: string, start: number, end: number): number {
  let value = 0
  let parts = 0
  let i = start
  while (parts < 4) {
    const partStart = i
    let octet = 0
    while (i < end) {
      const code = text.charCodeAt(i)
      if (code < DIGIT_0 || code > DIGIT_9) break
      octet = octet * 10 + (code - DIGIT_0)
      i++
    }
    const digits = i - partStart
    if (digits === 0 || digits > 3 || octet > 255) return -1
    if (digits > 1 && text.charCodeAt(partStart) === DIGIT_0) return -1
    // Multiplication rather than shifts: `<<` would turn the top octet negative.
    value = value * 256 + octet
    parts++
    if (parts < 4) {
      if (i >= end || text.charCodeAt(i) !== DOT) return -1
      i++
    }
  }
  return i === end ? value : -1
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30
  if (code >= 0x61 && code <= 0x66) return code - 0x57
  if (code >= 0x41 && code <= 0x46) return code - 0x37
  return -1
}

/** Parses `text[start, end)` into `groups`; false when it is not an IPv6 address. */
function parseIpv6(text: string, start: number, end: number): boolean {
  let count = 0
  // Index in `groups` where `::` stood, or -1.
  let gap = -1
  let i = start

  if (text.charCodeAt(i) === COLON) {
    if (i + 1 >= end || text.charCodeAt(i + 1) !== COLON) return false
    gap = 0
    i += 2
  }
  while (i < end) {
    if (count === 8) return false
    const groupStart = i
    let value = 0
    while (i < end) {
      const digit = hexValue(text.charCodeAt(i))
      if (digit < 0) break
      value = value * 16 + digit
      i++
    }
    if (i < end && text.charCodeAt(i) === DOT) {
      // An embedded IPv4 tail fills the last two groups and must end the address.
      if (count > 6) return false
      const ipv4 = parseIpv4(text, groupStart, end)
      if (ipv4 < 0) return false
      groups[count++] = ipv4 >>> 16
      groups[count++] = ipv4 & 0xffff
      break
    }
    const digits = i - groupStart
    if (digits === 0 || digits > 4) return false
    groups[count++] = value
    if (i === end) break
    if (text.charCodeAt(i) !== COLON) return false
    i++
    if (i < end && text.charCodeAt(i) === COLON) {
      if (gap >= 0) return false
      gap = count
      i++
    } else if (i === end) {
      return false
    }
  }

  if (gap < 0) return count === 8
  // `::` stands for at least one zero group.
  if (count === 8) return false
  // Plain loops: copyWithin and fill cost more than the eight moves they would save.
  const shift = 8 - count
  for (let index = count - 1; index >= gap; index--) {
    groups[index + shift] = groups[index] as number
  }
  for (let index = gap; index < gap + shift; index++) groups[index] = 0
  return true
}

function isIpv4Mapped(): boolean {
  return (
    groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff
  )
}

function maskGroups(prefix: number): void {
  for (let index = 0; index < 8; index++) {
    const bitsKept = prefix - index * 16
    if (bitsKept >= 16) continue
    groups[index] = bitsKept <= 0 ? 0 : (groups[index] as number) & (0xffff << (16 - bitsKept))
  }
}

/**
 * RFC 5952: lowercase, no leading zeros, and the longest run of two or more zero groups (the first
 * on a tie) written as `::`.
 */
function formatIpv6(): string {
  let runStart = -1
  let bestStart = -1
  let bestLength = 1
  for (let index = 0; index < 8; index++) {
    if (groups[index] !== 0) {
      runStart = -1
      continue
    }
    if (runStart < 0) runStart = index
    if (index - runStart + 1 > bestLength) {
      bestStart = runStart
      bestLength = index - runStart + 1
    }
  }

  const bestEnd = bestStart + bestLength
  let text = ''
  for (let index = 0; index < 8; index++) {
    if (index === bestStart) {
      text += '::'
      index = bestEnd - 1
      continue
    }
    if (index > 0 && index !== bestEnd) text += ':'
    const group = groups[index] as number
    text += group > 0xff ? `${HEX_BYTE[group >>> 8]}${HEX_BYTE_PADDED[group & 0xff]}` : (HEX_BYTE[group] as string)
  }
  return text
}
