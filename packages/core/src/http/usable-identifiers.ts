import { identifierKind } from '../rules/identifier-kind.js'
import { MAX_IDENTIFIER_LENGTH } from '../rules/keys.js'
import { textDigest } from '../support/digest.js'

/** Why an entry `identify` returned could not be used as it was. */
export type UnusableIdentifier = 'not-a-string' | 'too-long' | 'none'

function usable(entry: unknown): entry is string {
  return typeof entry === 'string' && entry !== '' && entry.length <= MAX_IDENTIFIER_LENGTH
}

/**
 * At most this much of an over-long identifier is hashed, with its length: hashing whatever a
 * client sends, megabytes included, on every request would be a denial-of-service lever.
 */
const HASHED_LENGTH = 65_536

function digestible(identifier: string): string {
  return identifier.length > HASHED_LENGTH ? `${identifier.length}:${identifier.slice(0, HASHED_LENGTH)}` : identifier
}

/** Plain loops: this runs for every request with an `identify`, over a handful of entries. */
function usableAndDistinct(list: readonly unknown[]): boolean {
  for (let i = 0; i < list.length; i++) {
    if (!usable(list[i])) return false
    for (let j = 0; j < i; j++) if (list[j] === list[i]) return false
  }
  return list.length > 0
}

/**
 * What `identify` returned, made into identifiers a decision takes, so that what a client sends
 * (a user id of 20,000 characters, a JSON object where a name belongs) can never turn its
 * request into an error: an entry that is not a non-empty string is left out, one too long is
 * replaced by its kind and a digest (`user:#<digest>`, the same for the same id), and a repeated
 * one is kept once. With nothing left, `fallback` (the client address) decides.
 */
export function usableIdentifiers(
  returned: unknown,
  fallback: string,
  onUnusable: (why: UnusableIdentifier) => void,
): string | readonly string[] {
  if (usable(returned)) return returned
  if (Array.isArray(returned) && usableAndDistinct(returned)) return returned
  const identifiers = new Set<string>()
  for (const entry of Array.isArray(returned) ? returned : [returned]) {
    if (usable(entry)) {
      identifiers.add(entry)
    } else if (typeof entry === 'string' && entry !== '') {
      onUnusable('too-long')
      const kind = identifierKind(entry)
      identifiers.add(`${kind === undefined ? '' : `${kind}:`}#${textDigest(digestible(entry))}`)
    } else {
      onUnusable('not-a-string')
    }
  }
  if (identifiers.size > 0) return [...identifiers]
  onUnusable('none')
  return fallback
}
