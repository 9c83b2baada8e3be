import { isIP } from 'node:net'
import { usageError } from './errors.js'

/** Where the URL came from, for messages: the flag, or the variable that stood in for it. */
export type RedisUrlSource = '--redis' | 'REDIS_URL'

/** What a `redis://` or `rediss://` URL says, decoded. */
export interface RedisTarget {
  readonly host: string
  readonly port: number
  readonly username: string | undefined
  readonly password: string | undefined
  readonly db: number
  readonly tls: boolean
  /** The URL with its credentials masked, for messages. */
  readonly shown: string
  /** What must never be printed: the password as written and decoded, and a lone user part. */
  readonly secrets: readonly string[]
}

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//
const HOSTNAME = /^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$/
const PERCENT_ESCAPES = /^(?:[^%]|%[0-9A-Fa-f]{2})*$/

/**
 * Reads `redis[s]://[[user]:password@]host[:port][/db]`. Everything before the last `@` is the
 * credentials, so that a password holding `@`, `/`, `?` or `#` unescaped is still never taken
 * for the host or the path, and never shown: a message repeats the URL as `shown` gives it.
 */
export function redisTargetOf(text: string, source: RedisUrlSource): RedisTarget {
  const shown = maskedUrl(text)
  const scheme = SCHEME.exec(text)?.[1]?.toLowerCase()
  if (scheme !== 'redis' && scheme !== 'rediss') {
    throw usageError(`${source} must be a redis:// or rediss:// URL, got ${JSON.stringify(shown)}`)
  }
  const bad = (what: string) => usageError(`${source}: ${what}, in ${JSON.stringify(shown)}`)
  const rest = text.slice(scheme.length + 3)
  const at = rest.lastIndexOf('@')
  const userinfo = at < 0 ? undefined : rest.slice(0, at)
  const address = rest.slice(at + 1)

  let username: string | undefined
  let password: string | undefined
  const secrets: string[] = []
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':')
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon)
    username = decoded(user, 'user name', bad)
    if (colon >= 0) {
      password = decoded(userinfo.slice(colon + 1), 'password', bad)
      secrets.push(userinfo.slice(colon + 1), password)
    } else {
      // Written alone, it may well be a password put where the user name goes.
      secrets.push(user, username)
    }
  }

  const suffix = address.search(/[?#]/)
  if (suffix >= 0) {
    throw bad(`the URL must end with the host, port or database; a query or fragment (${address[suffix]}…) is not read`)
  }
  const slash = address.indexOf('/')
  const authority = slash < 0 ? address : address.slice(0, slash)
  const path = slash < 0 ? '' : address.slice(slash)
  const { host, port } = hostAndPort(authority, bad)
  const db = path.length > 1 ? Number(path.slice(1)) : 0
  if (!/^\/?\d*$/.test(path) || !Number.isSafeInteger(db)) {
    throw bad(`the database in the URL's path must be a whole number, got ${JSON.stringify(path)}`)
  }
  return {
    host,
    port,
    username: username || undefined,
    password: password || undefined,
    db,
    tls: scheme === 'rediss',
    shown,
    secrets: [...new Set(secrets.filter((secret) => secret !== ''))],
  }
}

function decoded(text: string, what: string, bad: (what: string) => Error): string {
  // decodeURIComponent's own error ("URI malformed") says neither which part nor how to mend it.
  if (!PERCENT_ESCAPES.test(text)) {
    throw bad(`the ${what} has a '%' that does not start an escape of two hex digits (write '%' itself as %25)`)
  }
  try {
    return decodeURIComponent(text)
  } catch {
    throw bad(`the ${what} decodes to bytes that are not UTF-8`)
  }
}

function hostAndPort(authority: string, bad: (what: string) => Error): { host: string; port: number } {
  const bracketed = /^\[([^\]]*)\](.*)$/.exec(authority)
  const host = bracketed ? (bracketed[1] as string) : authority.replace(/:[^:]*$/, '')
  const afterHost = bracketed ? (bracketed[2] as string) : authority.slice(host.length)
  if (bracketed ? isIP(host) !== 6 : host !== '' && !HOSTNAME.test(host)) {
    const written = bracketed ? `[${host}]` : host
    throw bad(`the host ${JSON.stringify(written)} is neither a host name nor an IP address (IPv6 goes in brackets)`)
  }
  if (afterHost !== '' && !afterHost.startsWith(':')) {
    throw bad(`the host must be followed by ':port', '/db' or nothing, got ${JSON.stringify(afterHost)}`)
  }
  const portText = afterHost.slice(1)
  const port = portText === '' ? 6379 : Number(portText)
  if (!/^\d*$/.test(portText)) {
    // Not quoted: it may be a password written without its '@' (`redis://:s3cret`).
    throw bad('the port must be a number from 1 to 65535')
  }
  if (port < 1 || port > 65_535) throw bad(`the port must be a number from 1 to 65535, got ${portText}`)
  return { host: host === '' ? '127.0.0.1' : host, port }
}

/**
 * The URL with what precedes its last `@` masked (a user name before a `:` stays, it names the
 * ACL user), a port that is not a number masked (`redis://:s3cret` is a password without its
 * `@`), and any query or fragment cut, whether or not the rest of it parses.
 * @example maskedUrl('redis://alice:s3cret@cache:6379/2') // 'redis://alice:***@cache:6379/2'
 */
export function maskedUrl(text: string): string {
  const start = SCHEME.exec(text)?.[0].length ?? 0
  const at = text.lastIndexOf('@')
  let masked = text
  if (at >= start) {
    const userinfo = text.slice(start, at)
    const colon = userinfo.indexOf(':')
    masked = `${text.slice(0, start)}${colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`}${text.slice(at)}`
  }
  const hostStart = at >= start ? masked.indexOf('@', start) + 1 : start
  const address = masked.slice(hostStart)
  const end = address.search(/[/?#]/)
  const authority = end < 0 ? address : address.slice(0, end)
  const port = /^(\[[^\]]*\]|[^:[]*):(.*)$/.exec(authority)
  if (port && !/^\d*$/.test(port[2] as string)) {
    masked = `${masked.slice(0, hostStart)}${port[1]}:***${end < 0 ? '' : address.slice(end)}`
  }
  const suffix = masked.slice(start).search(/[?#]/)
  return suffix < 0 ? masked : `${masked.slice(0, start + suffix + 1)}…`
}

/** Text with the credentials of any URL in it masked: for messages that quote what was typed. */
export function maskedUrls(text: string): string {
  // A quote or stop that ends the word is the message's, not the URL's.
  return text.replace(/[A-Za-z][A-Za-z0-9+.-]*:\/\/\S*/g, (word) => {
    const url = word.replace(/['"`),.;]+$/, '')
    return maskedUrl(url) + word.slice(url.length)
  })
}
