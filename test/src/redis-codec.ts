import type { BucketState } from '../../packages/core/src/algorithms/bucket.js'
import type { FixedWindowState } from '../../packages/core/src/algorithms/fixed-window.js'
import type { SlidingLogState } from '../../packages/core/src/algorithms/sliding-log.js'
import type { SlidingWindowState } from '../../packages/core/src/algorithms/sliding-window.js'
import type { Window } from '../../packages/core/src/rules/rules.js'
import {
  ADDABLE,
  ADDABLE_ENDS_BEFORE,
  type CounterAlgorithm,
  type CounterState,
  layoutOf,
  MAX_PACKED,
} from '../../packages/core/src/stores/shared/redis-state.js'

/*
 * The other half of core's codec of what the scripts keep in Redis (stores/shared/redis-state.ts
 * reads a counter's value into a model's state, as a HybridStore does): a counter's value and TTL
 * as the decide script writes them, a model's state back into fields, and a sliding log's
 * members. Only tests use them, to hold the Lua and the TypeScript models to one layout.
 */

/**
 * The value the decide script would write for this state: addable, else compact, for one window
 * whose fields fit, else text; undefined when no window has fields (the script deletes such a key). Write it
 * with a TTL of `counterExpiresAt(…) − now`.
 */
export function encodeCounterState<A extends CounterAlgorithm>(
  algorithm: A,
  windows: readonly Window[],
  state: CounterState<A>,
): string | undefined {
  const layout = layoutOf(algorithm)
  const first = state[0]
  if (windows.length === 1 && first !== undefined) {
    const values = layout.values(first)
    const addable = layout.arity === 2 ? addableOf(values) : undefined
    if (addable !== undefined) return addable
    const compact = packDigits(values)
    if (compact !== undefined) return compact
  }
  let text = ''
  windows.forEach((window, k) => {
    const fields = state[k]
    if (fields !== undefined) text += `${[window.periodMs, ...layout.values(fields)].join(':')} `
  })
  return text === '' ? undefined : text
}

/** When the key stops mattering, as the script sets its TTL: the latest of its windows' ends (0: it already has). */
export function counterExpiresAt<A extends CounterAlgorithm>(
  algorithm: A,
  windows: readonly Window[],
  state: CounterState<A>,
): number {
  const layout = layoutOf(algorithm)
  let latest = 0
  windows.forEach((window, k) => {
    const fields = state[k]
    if (fields !== undefined) latest = Math.max(latest, layout.expiresAt(window, fields))
  })
  return latest
}

/** The fields of a TypeScript model's state, per window of the rule: the inverse of `toModelState`. */
export function fromModelState<A extends CounterAlgorithm>(
  algorithm: A,
  windows: readonly Window[],
  model: FixedWindowState | SlidingWindowState | BucketState | undefined,
): CounterState<A> {
  const layout = layoutOf(algorithm)
  const { arity } = layout
  return windows.map((window) => {
    if (model === undefined) return undefined
    for (let at = 0; at < model.length; at += arity + 1) {
      if (model[at] === window.periodMs) return layout.fromModel(window, model.slice(at + 1, at + 1 + arity))
    }
    return undefined
  })
}

/** The addable value of a time in whole seconds (ms) and a count below ADDABLE, as the scripts write it. */
export function addable(time: number, count: number): string {
  const value = addableOf([time, count])
  if (value === undefined) throw new RangeError(`${time} and ${count} do not fit the addable form`)
  return value
}

/** The addable form of two fields (a time in whole seconds, a count below ADDABLE), or undefined when they do not fit it. */
function addableOf([time, count]: readonly number[]): string | undefined {
  if (time === undefined || count === undefined) return undefined
  if (!Number.isInteger(count) || count < 0 || count >= ADDABLE) return undefined
  if (time <= 0 || time % 1000 !== 0 || time >= ADDABLE_ENDS_BEFORE) return undefined
  return String(-((time / 1000) * ADDABLE + count))
}

/**
 * The digits of the fields, or undefined when one is not a whole number ≥ 0 or a field after the
 * first passes 9 digits. String(n) and Lua's formatting agree on every integer below 2^53.
 */
function packDigits(values: readonly number[]): string | undefined {
  const [first, ...rest] = values
  if (!Number.isInteger(first) || (first as number) < 0) return undefined
  if (!rest.every((n) => Number.isInteger(n) && n >= 0 && n <= MAX_PACKED)) return undefined
  const digits = rest.map(String)
  return String(first) + digits.join('') + digits.map((text) => String(text.length)).join('')
}

/** One entry of a sliding log: a charge made `at` (ms), `total` the running total of units after it. */
export interface SlidingLogEntry {
  at: number
  total: number
}

/** Bytes of a member: a running total below 2^53 as a 7-byte big-endian integer, so members sort like their numbers. */
const MEMBER_BYTES = 7
const TWO_TO_48 = 2 ** 48

/** The member a sliding log holds for a running total (lua's struct.pack('>I7', total)). */
export function slidingLogMember(total: number): Buffer {
  const member = Buffer.alloc(MEMBER_BYTES)
  member[0] = Math.floor(total / TWO_TO_48)
  member.writeUIntBE(total % TWO_TO_48, 1, MEMBER_BYTES - 1)
  return member
}

/**
 * A sliding-log key's entries, oldest first, from `ZRANGE key 0 -1 WITHSCORES` read as buffers
 * (ioredis `zrangeBuffer`: members are binary): member, score, member, score… The key holds every
 * charge still counted and the newest entry at or before the longest window's start, where the
 * windows start counting (older ones go at the next charge). A window's usage is the newest
 * total less the total of the newest entry at or before its start (0 when there is none). The
 * key expires when its newest entry leaves the longest window.
 */
export function decodeSlidingLog(withScores: readonly Buffer[]): SlidingLogEntry[] {
  const entries: SlidingLogEntry[] = []
  for (let i = 0; i + 1 < withScores.length; i += 2) {
    const member = withScores[i] as Buffer
    if (member.length !== MEMBER_BYTES) throw new TypeError(`not a sliding-log member: ${member.toString('hex')}`)
    const at = Number((withScores[i + 1] as Buffer).toString())
    entries.push({ at, total: (member[0] as number) * TWO_TO_48 + member.readUIntBE(1, MEMBER_BYTES - 1) })
  }
  return entries
}

/** `ZADD key` arguments for these entries: score, member, score, member… */
export function encodeSlidingLog(entries: readonly SlidingLogEntry[]): Array<number | Buffer> {
  return entries.flatMap((entry) => [entry.at, slidingLogMember(entry.total)])
}

/** When a sliding log stops mattering, as the script sets its TTL: its newest entry plus the longest period (0: empty). */
export function slidingLogExpiresAt(entries: readonly SlidingLogEntry[], windows: readonly Window[]): number {
  const newest = entries[entries.length - 1]
  if (newest === undefined) return 0
  return newest.at + Math.max(...windows.map((window) => window.periodMs))
}

/** The TypeScript model's state (algorithms/sliding-log.ts) that decides as these entries do; undefined when empty. */
export function toSlidingLogModel(entries: readonly SlidingLogEntry[]): SlidingLogState | undefined {
  if (entries.length === 0) return undefined
  return { times: entries.map((entry) => entry.at), totals: entries.map((entry) => entry.total), base: 0, start: 0 }
}
