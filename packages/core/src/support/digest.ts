import { createHash } from 'node:crypto'

/**
 * A short, stable stand-in for text that cannot be used as it is: SHA-256, 162 bits in
 * base64url. The digest covers the UTF-16 code units, not UTF-8, because UTF-8 would map every
 * lone surrogate to U+FFFD and make distinct texts collide.
 */
export function textDigest(text: string): string {
  return createHash('sha256').update(text, 'utf16le').digest('base64url').slice(0, 27)
}
