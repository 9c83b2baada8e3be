import { randomBytes } from 'node:crypto'
import { isReplyError } from '../../redis-clients/reply-errors.js'
import { encodeKeyPart } from '../../rules/keys.js'

/**
 * Writes that give units back (refunds, undos, resets) go with an operation's key, so that a
 * command a client sends again after a lost reply applies once (lua/lib/operation.lua).
 */

/** Unique across processes by its random part, and within one by its count. */
const PROCESS_PART = randomBytes(8).toString('hex')
let count = 0

/**
 * A new operation's key, in the Cluster slot of `identifier`'s keys: `<prefix>!op:{<identifier>}:<id>`.
 * `!` is never part of a rule's part of a key, so no state key can be an operation's.
 */
export function operationKey(prefix: string, identifier: string): string {
  count++
  return `${prefix}!op:{${encodeKeyPart(identifier)}}:${PROCESS_PART}${count.toString(36)}`
}

/** The same, for keys already built: their hash tag is the operation key's. */
export function operationKeyBeside(prefix: string, key: string): string {
  const open = key.indexOf('{')
  const close = key.indexOf('}', open + 1)
  count++
  return `${prefix}!op:{${key.slice(open + 1, close)}}:${PROCESS_PART}${count.toString(36)}`
}

/** How long a call whose outcome is unknown is sent again as it was: within its operation key's minute, with a margin. */
const RESEND_WITHIN_MS = 50_000

/**
 * Whether a call that failed, first sent at `since` (`performance.now()`), is to be sent again as
 * it was, under the same operation key: it failed without Redis's answer, so it may have run, and
 * its key still says so. Otherwise its units go back to be sent with the next ones.
 */
export function resendAsItWas(error: unknown, since: number): boolean {
  return !isReplyError(error) && performance.now() - since < RESEND_WITHIN_MS
}
