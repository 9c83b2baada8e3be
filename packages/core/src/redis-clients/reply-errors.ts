/** The classes of Redis's error replies: ioredis's (and iovalkey's) and node-redis's. */
const REPLY_ERRORS = new Set(['ReplyError', 'ErrorReply', 'SimpleError', 'BlobError'])

/**
 * Whether Redis answered the call with an error: the command did not run, where a call that
 * failed without an answer (a lost connection, a client closed) may have. ioredis names its
 * errors; node-redis's keep the name `Error`, so their classes are looked at too.
 */
export function isReplyError(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false
  if (REPLY_ERRORS.has(String((error as { name?: unknown }).name))) return true
  for (let proto = Object.getPrototypeOf(error); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name
    if (typeof name === 'string' && REPLY_ERRORS.has(name)) return true
  }
  return false
}

/** Whether Redis said it does not hold a script: the call is made again with the script's text. */
export function isNoScript(error: unknown): boolean {
  return isReplyError(error) && String((error as Error).message).startsWith('NOSCRIPT')
}

/**
 * Whether a Cluster client gave up on a call that Redis's nodes kept redirecting (MOVED, ASK,
 * TRYAGAIN), as while a slot is being migrated: the nodes answered all along, none is failing.
 * ioredis and iovalkey wrap the last redirection in an error of their own; node-redis throws it.
 */
export function isRedirectedToTheEnd(error: unknown): boolean {
  return (
    error instanceof Error &&
    /^(?:Too many Cluster redirections\. Last error: ReplyError: )?(?:MOVED|ASK|TRYAGAIN) /.test(error.message)
  )
}
