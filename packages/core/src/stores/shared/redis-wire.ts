import type { AlgorithmName, Window } from '../../rules/rules.js'
import { TollgateError } from '../../support/errors.js'
import type { StoreOperation, StoreTarget, StoreWindowResult } from '../store.js'

/**
 * What travels between RedisStore and lua/decide.lua: one script argument per decision, and the
 * decision's part of the script's flat reply (the script's header comment describes both).
 */

/** The code the decide script runs an algorithm by: token buckets and GCRA are one model there. */
export const SCRIPT_ALGORITHM: Readonly<Record<AlgorithmName, string>> = {
  'sliding-log': 'sl',
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'token-bucket': 'tb',
  gcra: 'tb',
}

/**
 * Redis error codes that say the server refuses everyone right now, whichever keys are asked
 * (out of memory, read-only, not authenticated, loading, a Cluster without a quorum…). Met by one
 * decision inside the script, such an error is still the store's failure; any other error met
 * there (WRONGTYPE, a state the script cannot read) is that decision's own.
 */
const SERVER_DOWN_CODES = new Set([
  'OOM',
  'READONLY',
  'MISCONF',
  'NOREPLICAS',
  'MASTERDOWN',
  'LOADING',
  'BUSY',
  'NOAUTH',
  'WRONGPASS',
  'NOPERM',
  'CLUSTERDOWN',
  'TRYAGAIN',
])

/**
 * The script's argument for one decision: `operation cost now spec|spec…`, or for a decision that
 * may shed `operation cost now * spec|spec…`, followed by its random number as an argument of its
 * own, so that the request's text repeats and the script parses it once per batch; or for one sent
 * with an operation's key (a refund or an undo, applied once) `operation cost now ! spec|spec…`. A
 * spec is the algorithm's code then `limit period` per window, `limit period/lowBurst` for one
 * that sheds.
 */
export class ScriptArguments {
  /** A rule's windows always encode to the same spec; each is encoded once. */
  private readonly specs = new WeakMap<readonly Window[], string>()

  /** `time` is milliseconds, or '-' for the server's TIME; `once`: sent with an operation's key. */
  of(
    operation: StoreOperation | 'undo',
    cost: number,
    time: string,
    random: number | undefined,
    targets: readonly StoreTarget[],
    once = false,
  ): string {
    const marker = random !== undefined ? '* ' : once ? '! ' : ''
    let argument = `${operation} ${cost} ${time} ${marker}${this.specOf(targets[0] as StoreTarget)}`
    for (let i = 1; i < targets.length; i++) argument += `|${this.specOf(targets[i] as StoreTarget)}`
    return argument
  }

  /** The target's windows' spec, and its block's after it (lua/lib/lockout.lua). */
  private specOf(target: StoreTarget): string {
    const { block } = target
    return block === undefined ? this.windowsSpecOf(target) : this.windowsSpecOf(target) + block.spec
  }

  private windowsSpecOf(target: StoreTarget): string {
    let spec = this.specs.get(target.windows)
    if (spec === undefined) {
      spec = SCRIPT_ALGORITHM[target.algorithm]
      for (const window of target.windows) {
        spec += ` ${window.limit} ${window.periodMs}`
        if (window.lowBurst !== undefined) spec += `/${window.lowBurst}`
      }
      this.specs.set(target.windows, spec)
    }
    return spec
  }
}

/**
 * A decision's random number as the script reads it: as JavaScript prints it, the shortest text
 * that reads back as the same double, so that the script compares the very same number.
 */
export function randomArgument(random: number): string {
  return String(random)
}

/**
 * The numbers a decision's reply holds: allowed with now, then for a decision sent with a random
 * number whether it was shed, then for one with a block whether a block refused it, then three
 * per window of each target.
 */
export function replyWidth(targets: readonly StoreTarget[], random: number | undefined): number {
  let width = random === undefined ? 1 : 2
  if (hasBlock(targets)) width++
  for (const target of targets) width += 3 * target.windows.length
  return width
}

export function hasBlock(targets: readonly StoreTarget[]): boolean {
  for (const target of targets) if (target.block !== undefined) return true
  return false
}

export interface DecodedReply {
  allowed: boolean
  shed?: boolean
  blocked?: boolean
  nowMs: number
  windows: StoreWindowResult[]
}

/** A decision's `width` numbers, `replies[at]` onwards; `random` and `blocks` (hasBlock) as the decision was sent. */
export function decodeReply(
  replies: readonly unknown[],
  at: number,
  width: number,
  random: number | undefined,
  blocks = false,
): DecodedReply {
  // The script's time, doubled, plus 1 when allowed: one integer where two would cost more.
  const head = replies[at] as number
  const allowed = head % 2 === 1
  const nowMs = allowed ? (head - 1) / 2 : head / 2
  const windows: StoreWindowResult[] = []
  const flags = random === undefined ? at + 1 : at + 2
  const first = blocks ? flags + 1 : flags
  for (let i = first; i < at + width; i += 3) {
    const remaining = replies[i] as number | string
    const fitsAt = replies[i + 2] as number
    windows.push({
      // Text when it is within 128 of 2^53 (lua/lib/numbers.lua), which RESP3 clients would round.
      remaining: typeof remaining === 'number' ? remaining : Number(remaining),
      resetAtMs: replies[i + 1] as number,
      fitsAtMs: fitsAt < 0 ? Number.POSITIVE_INFINITY : fitsAt,
    })
  }
  if (random !== undefined && replies[at + 1] === 1) return { allowed, shed: true, nowMs, windows }
  if (blocks && replies[flags] === 1) return { allowed, blocked: true, nowMs, windows }
  return { allowed, nowMs, windows }
}

/** Whether a decision's reply is the one string of the error it met instead of its numbers. */
export function isDecisionError(first: unknown): boolean {
  return typeof first === 'string' || Buffer.isBuffer(first)
}

/**
 * What one decision met inside the script: a server-wide refusal (OOM, READONLY…) says the store
 * is down; anything else (a key holding the wrong type) concerns that decision's keys alone.
 */
export function decisionFailure(keys: readonly string[], said: string): TollgateError {
  const code = /^[A-Z]+(?= )/.exec(said)?.[0] ?? ''
  return new TollgateError('TG_STORE', `the store failed on ${keys.join(', ')}: ${said}`, {
    storeDown: SERVER_DOWN_CODES.has(code),
  })
}
