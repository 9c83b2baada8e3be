import { textDigest } from '../support/digest.js'
import { describeValue, TollgateArgumentError, TollgateConfigError } from '../support/errors.js'
import type { AlgorithmName } from './rules.js'

/**
 * Key layout: `<prefix><rule>:{<identifier>}:<algorithm>`, where `<rule>` is the rule's
 * `stateName` (`name@shape`, state-name.ts).
 *
 * The identifier is the Cluster hash tag, so every rule and window of one identifier lives in
 * one slot while different identifiers spread over the cluster. Both parts are written raw
 * when they are short and made of characters that cannot confuse the layout, and as `#` plus
 * a SHA-256 digest otherwise. Raw parts never contain `#`, `{` or `}`, so a raw part and a
 * hashed one cannot meet, the first `{` always opens the tag and the first `}` closes it.
 */
export const MAX_RAW_PART_LENGTH = 64
const RAW_PART = new RegExp(`^[A-Za-z0-9._:@+=/-]{1,${MAX_RAW_PART_LENGTH}}$`)
/** The last part of a key: which algorithm's state it holds (token buckets and GCRA apart). */
const KEY_SUFFIX: Readonly<Record<AlgorithmName, string>> = {
  'sliding-log': 'sl',
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'token-bucket': 'tb',
  gcra: 'gc',
}

/** Identifiers longer than this are refused outright: nothing legitimate needs them, and hashing megabytes per request is a denial-of-service lever. */
export const MAX_IDENTIFIER_LENGTH = 16_384

export function encodeKeyPart(part: string): string {
  if (RAW_PART.test(part)) return part
  return `#${textDigest(part)}`
}

/** `owner`: what the option belongs to, to name it in the error (`HybridStore`). */
export function validatePrefix(prefix: unknown, owner?: string): string {
  if (typeof prefix !== 'string' || prefix.length > 64 || /[{}]/.test(prefix)) {
    throw new TollgateConfigError(
      `${owner === undefined ? '' : `${owner} `}option prefix must be a string of at most 64 characters without '{' or '}' (they would break Cluster hash tags), got ${describeValue(prefix)}`,
    )
  }
  return prefix
}

export function validateIdentifier(identifier: unknown): string {
  if (typeof identifier !== 'string' || identifier.length === 0) {
    throw new TollgateArgumentError(`an identifier must be a non-empty string, got ${describeValue(identifier)}`)
  }
  if (identifier.length > MAX_IDENTIFIER_LENGTH) {
    throw new TollgateArgumentError(
      `an identifier must be at most ${MAX_IDENTIFIER_LENGTH} characters, got one of ${identifier.length}`,
    )
  }
  return identifier
}

/** Builds state keys; rule parts are encoded once, identifier parts on each call. */
export class KeyBuilder {
  readonly prefix: string
  private readonly ruleParts = new Map<string, string>()

  constructor(prefix: string) {
    this.prefix = validatePrefix(prefix)
  }

  key(rule: string, algorithm: AlgorithmName, identifier: string): string {
    return this.keyOfPart(rule, algorithm, encodeKeyPart(identifier))
  }

  /** The key of an identifier already encoded by `encodeKeyPart`. */
  keyOfPart(rule: string, algorithm: AlgorithmName, identifierPart: string): string {
    let head = this.ruleParts.get(rule)
    if (head === undefined) {
      head = `${this.prefix}${encodeKeyPart(rule)}:{`
      this.ruleParts.set(rule, head)
    }
    return `${head}${identifierPart}}:${KEY_SUFFIX[algorithm]}`
  }
}
