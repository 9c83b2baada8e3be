import { createHmac, randomBytes } from 'node:crypto'

/** How long a handle resolves after the last update that listed its offender, at the least. */
const MIN_LIFETIME_MS = 60_000
/** The most handles held: 20 offenders an update, each a string of at most a few KiB. */
const MAX_HANDLES = 10_000
/** Bytes of the digest a handle carries: 128 bits, base64url. */
const HANDLE_BYTES = 16

interface Listed {
  rule: string
  identifier: string
  lastListedMs: number
}

/**
 * Handles for the top offenders, so that a page that shows their identifiers masked can still ask
 * for one of them to be reset, by the handle of its row. A handle is an HMAC of the rule and the
 * identifier, keyed with a secret this view draws when it starts: it tells nothing of the
 * identifier (a guess hashed without the key matches nothing), and the same offender keeps its
 * handle while the view runs. The view resolves only handles it gave, for an offender listed
 * within the last `lifetimeMs`: a client cannot make one for an identifier of its choosing, only
 * send back one the view showed it. The reset itself still needs the view's token.
 */
export class OffenderHandles {
  private readonly key = randomBytes(32)
  private readonly listed = new Map<string, Listed>()
  private readonly lifetimeMs: number

  /** `intervalMs`: how often pages get an update, so that a handle outlives a few of them. */
  constructor(intervalMs: number) {
    this.lifetimeMs = Math.max(MIN_LIFETIME_MS, 3 * intervalMs)
  }

  /** The handle of an offender an update lists now; it resolves from now on. */
  handleOf(rule: string, identifier: string, nowMs: number): string {
    const handle = createHmac('sha256', this.key)
      .update(`${rule}\n${identifier}`, 'utf8')
      .digest()
      .subarray(0, HANDLE_BYTES)
      .toString('base64url')
    // Deleted first, so that the map stays in the order offenders were last listed.
    this.listed.delete(handle)
    this.listed.set(handle, { rule, identifier, lastListedMs: nowMs })
    this.forgetOld(nowMs)
    return handle
  }

  /** The offender of a handle this view gave, or undefined when it gave none or it has expired. */
  resolve(handle: string, nowMs: number): { rule: string; identifier: string } | undefined {
    this.forgetOld(nowMs)
    const listed = this.listed.get(handle)
    return listed && { rule: listed.rule, identifier: listed.identifier }
  }

  private forgetOld(nowMs: number): void {
    for (const [handle, { lastListedMs }] of this.listed) {
      if (this.listed.size <= MAX_HANDLES && nowMs - lastListedMs <= this.lifetimeMs) break
      this.listed.delete(handle)
    }
  }
}
