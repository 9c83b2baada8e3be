import { createHmac, randomBytes } from 'node:crypto'

const IPV4 = /^ip:(\d{1,3}\.\d{1,3}\.\d{1,3})\.\d{1,3}$/
const IPV6_NETWORK = /^ip:([0-9a-f:]+)\/\d{1,3}$/
/** Hex digits of the digest shown: enough to tell a page's identifiers apart. */
const DIGEST_LENGTH = 8

/**
 * Identifiers as the page shows them by default: an IPv4 address cut to its /24, an IPv6 network
 * to its /48, anything else to its kind (`user:`) and a short digest. The digest is keyed with a
 * secret of this process, so that a digest of a guessable identifier (a user id, a small address
 * space) cannot be reversed by hashing guesses; the same identifier keeps its digest while the
 * view runs.
 * @example mask('ip:203.0.113.7') // 'ip:203.0.113.*'
 * @example mask('user:alice') // 'user:#3f9a1c2e'
 */
export function identifierMask(): (identifier: string) => string {
  const key = randomBytes(32)
  const digest = (text: string) => createHmac('sha256', key).update(text, 'utf8').digest('hex').slice(0, DIGEST_LENGTH)
  return (identifier) => {
    const ipv4 = IPV4.exec(identifier)
    if (ipv4) return `ip:${ipv4[1]}.*`
    const ipv6 = IPV6_NETWORK.exec(identifier)
    if (ipv6) {
      const groups = expandIpv6(ipv6[1] as string)
      if (groups) return `ip:${groups.slice(0, 3).join(':')}:*`
    }
    const colon = identifier.indexOf(':')
    // A kind is a short word (`ip`, `user`, `key`); a longer head may be the identifier itself.
    const kind =
      colon > 0 && colon <= 16 && /^[\w.-]+$/.test(identifier.slice(0, colon)) ? identifier.slice(0, colon + 1) : ''
    return `${kind}#${digest(identifier)}`
  }
}

/** The eight groups of an IPv6 address in RFC 5952 form (as `ipIdentifier` writes them), or undefined. */
function expandIpv6(address: string): string[] | undefined {
  const halves = address.split('::')
  if (halves.length > 2) return undefined
  const head = halves[0] === '' ? [] : (halves[0] as string).split(':')
  const tail = halves.length === 2 && halves[1] !== '' ? (halves[1] as string).split(':') : []
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  const groups = [...head, ...Array<string>(missing).fill('0'), ...tail]
  return groups.every((group) => /^[0-9a-f]{1,4}$/.test(group)) ? groups : undefined
}
