import { describeValue, TollgateError } from '../errors.js'
import type { AlgorithmName, Window } from '../rules.js'
import { groupBySlot } from './cluster-slots.js'
import { isFolded } from './hybrid-bucket-fold.js'
import type { KeySlots } from './hybrid-slots.js'
import { SCRIPT_ALGORITHM } from './redis-wire.js'

/**
 * What travels between a HybridStore and lua/sync.lua: keys in chunks of at most MAX_CHUNK, one
 * script call each (per Cluster slot), and their answers.
 */

/** Keys per script call: a call holds Redis for about this many keys' work. */
export const MAX_CHUNK = 500

export type SyncCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>

/** A key's part of a sync's answer: its value after the push, and the units pushed above a limit. */
export interface SyncedValue {
  after: string
  overAdmitted: number
}

export interface ChunkAnswer {
  /** The server's time when the script ran (ms). */
  serverMs: number
  /** Live processes, counted by the heartbeat; undefined when the chunk carried none. */
  instances: number | undefined
  /** Per key of the chunk, in order: its values, or the error that key alone met. */
  values: Array<SyncedValue | TollgateError>
}

/** A rule's windows always encode to the same text: each is encoded once. */
const ruleTexts = new WeakMap<readonly Window[], Map<AlgorithmName, string>>()

/** A rule's text in the sync and lease scripts' entries: 'code limit period limit period …'. */
export function ruleTextOf(algorithm: AlgorithmName, windows: readonly Window[]): string {
  let texts = ruleTexts.get(windows)
  if (texts === undefined) {
    texts = new Map()
    ruleTexts.set(windows, texts)
  }
  let text = texts.get(algorithm)
  if (text === undefined) {
    text = SCRIPT_ALGORITHM[algorithm]
    for (const window of windows) text += ` ${window.limit} ${window.periodMs}`
    texts.set(algorithm, text)
  }
  return text
}

/**
 * The keys, by their `names`, as chunks of their indices: one Cluster slot per chunk (a script
 * runs on one slot), at most MAX_CHUNK keys each.
 */
export function chunksOf(names: readonly string[], cluster: boolean): number[][] {
  const groups = cluster ? groupBySlot(names) : [names.map((_, i) => i)]
  const chunks: number[][] = []
  for (const group of groups) {
    for (let at = 0; at < group.length; at += MAX_CHUNK) chunks.push(group.slice(at, at + MAX_CHUNK))
  }
  return chunks
}

/** A key's entry in the sync script's ARGV: its rule's text, then the units it pushes (none: it is only read). */
export function syncEntryOf(
  algorithm: AlgorithmName,
  windows: readonly Window[],
  units: readonly number[] | undefined,
): string {
  if (units === undefined) return `${ruleTextOf(algorithm, windows)}|`
  return `${ruleTextOf(algorithm, windows)}|${isFolded(units) ? '~' : ''}${units.join(' ')}`
}

/** The `sending` units of each of the chunk's keys, as the sync script's entries. */
export function pushEntries(slots: KeySlots, chunk: readonly number[]): string[] {
  return chunk.map((slot) => {
    const shape = slots.shape(slot)
    return syncEntryOf(shape.algorithm, shape.windows, slots.sending.get(slot))
  })
}

/**
 * The script's KEYS and ARGV for a chunk: `time` is ms or '-' (server TIME); `heartbeat` is
 * `[instancesKey, 'instance ttl']` when the chunk says this process is alive; `operationKey`
 * makes its push apply once however often it is sent (lua/lib/operation.lua); `names` are the
 * chunk's keys in Redis and `entries` theirs in ARGV (`syncEntryOf`).
 */
export function chunkArguments(
  entries: readonly string[],
  names: readonly string[],
  time: string,
  heartbeat: readonly [string, string] | undefined,
  operationKey: string | undefined,
): { keyCount: number; keysAndArgs: string[] } {
  const keys: string[] = []
  if (heartbeat) keys.push(heartbeat[0])
  if (operationKey !== undefined) keys.push(operationKey)
  for (const name of names) keys.push(name)
  const args: string[] = [time, heartbeat ? heartbeat[1] : '', operationKey === undefined ? '' : '1', ...entries]
  return { keyCount: keys.length, keysAndArgs: [...keys, ...args] }
}

/** The script's reply read back for the chunk's `keys`; throws TG_STORE for one that does not parse. */
export function readChunkReply(reply: unknown, keys: readonly string[]): ChunkAnswer {
  if (!Array.isArray(reply) || reply.length !== 2 + 2 * keys.length || typeof reply[0] !== 'number') {
    throw new TollgateError('TG_STORE', `unexpected reply from the sync script: ${describeValue(reply)}`)
  }
  const instances = reply[1] as number
  const values: Array<SyncedValue | TollgateError> = []
  for (let i = 0; i < keys.length; i++) {
    const after = String(reply[2 + 2 * i])
    if (after.startsWith('!')) {
      values.push(
        new TollgateError('TG_STORE', `the store failed on ${keys[i]}: ${after.slice(1)}`, { storeDown: false }),
      )
      continue
    }
    values.push({ after, overAdmitted: Number(reply[3 + 2 * i]) })
  }
  return { serverMs: reply[0] as number, instances: instances >= 0 ? instances : undefined, values }
}
