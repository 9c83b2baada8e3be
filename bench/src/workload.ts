import { IDENTIFIER_COUNT, ORG_COUNT } from './config.js'
import type { RuleShape } from './contenders/contender.js'

/** `hot-over-limit`: one hot key whose limit is far below what is asked of it, so that nearly every decision refuses. */
export type KeySpread = 'many' | 'hot' | 'hot-over-limit'

export const KEY_SPREAD_LABEL: Readonly<Record<KeySpread, string>> = {
  many: '10,000 identifiers',
  hot: 'one hot key',
  'hot-over-limit': 'one hot key over its limit',
}

export const SHAPE_LABEL: Readonly<Record<RuleShape, string>> = {
  'one-window': '1 window × 1 identifier',
  'two-by-two': '2 windows × 2 identifiers',
}

const ips = Array.from({ length: IDENTIFIER_COUNT }, (_, i) => `ip:10.0.${i >> 8}.${i & 255}`)
const users = Array.from({ length: IDENTIFIER_COUNT }, (_, i) => `user:${i}`)
const singles = ips.map((ip) => [ip])
const pairs = ips.map((ip, i) => [ip, users[i] as string])
const hotSingle = ['ip:203.0.113.7']
const hotPair = ['ip:203.0.113.7', 'user:42']

/** The identifiers of the i-th decision: an IP (and, for two-by-two, that client's user), cycling through 10,000 clients or always the same one. */
export function identifiersOf(shape: RuleShape, spread: KeySpread): (i: number) => readonly string[] {
  if (spread !== 'many') {
    const hot = shape === 'one-window' ? hotSingle : hotPair
    return () => hot
  }
  const table = shape === 'one-window' ? singles : pairs
  return (i) => table[i % IDENTIFIER_COUNT] as string[]
}

/** The identifiers of the i-th decision of a user in an org: 10,000 users, user n in org n mod 100. */
export function usersInOrgs(): (i: number) => readonly string[] {
  const table = Array.from({ length: IDENTIFIER_COUNT }, (_, i) => [`user:${i}`, `org:${i % ORG_COUNT}`])
  return (i) => table[i % IDENTIFIER_COUNT] as string[]
}

/** `count` distinct single identifiers, for the bytes measure. */
export function distinctIdentifiers(count: number): string[][] {
  return Array.from({ length: count }, (_, i) => [`ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`])
}
