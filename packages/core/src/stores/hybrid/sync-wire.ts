import type { AlgorithmName, Window } from '../../rules/rules.js'
import { describeValue, TollgateError } from '../../support/errors.js'
import { SCRIPT_ALGORITHM } from '../shared/redis-wire.js'
import { isFolded } from './bucket-fold.js'
import type { KeyTable } from './key-table.js'

/**
 * What travels between a HybridStore and lua/sync.lua: keys in chunks of at most MAX_CHUNK, one
 * script call each (per Cluster master), and their answers.
 */

/** Keys per script call: a call holds Redis for about this many keys' work. */
export const MAX_CHUNK = 500

export type SyncCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>

export interface ChunkAnswer {
  /** The server's time when the script ran (ms). */
  serverMs: number
  /** Live processes, counted by the heartbeat; undefined when the chunk carried none. */
  instances: number | undefined
  /**
   * Per key of the chunk, in order: its value after the push ('' for no key), the error that key
   * alone met, or ELSEWHERE_UNPUSHED / ELSEWHERE_PUSHED for a key the node does not serve.
   */
  values: Array<string | TollgateError | Elsewhere>
  /** Units pushed above a limit, by the key's index in the chunk: only keys that pushed some. */
  overAdmitted: Map<number, number> | undefined
}

/** What one call of a sync came to, as the sync reports it (an approximate push or a strict chunk alike). */
export interface ChunkOutcome {
  overAdmitted: number
  /** Live processes, when the call carried the heartbeat. */
  instances: number | undefined
  /** The first error a key of the call met alone (a key of another type): the others synced. */
  keyError?: TollgateError
  /**
   * Why the call did not run while its node answered all along: a Cluster redirected it until the
   * client gave up (a slot being migrated). Its units wait; the node is not failing.
   */
  refused?: TollgateError
}

/**
 * A key the call's node does not serve, on a Cluster: its slot is another node's (the client's map
 * is out of date) or the key moved out of a slot being migrated. `pushed` when the call had run
 * before (sent again after a lost reply) and pushed the key's units then, so that only its value
 * after is not known; otherwise nothing of the key was written and its units are still to push.
 */
export interface Elsewhere {
  readonly pushed: boolean
}

const ELSEWHERE_UNPUSHED: Elsewhere = Object.freeze({ pushed: false })
const ELSEWHERE_PUSHED: Elsewhere = Object.freeze({ pushed: true })

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

/** The indices of `count` keys as chunks of at most MAX_CHUNK (one Redis server: no slots to keep apart). */
export function rangesOf(count: number): Chunk[] {
  const chunks: Chunk[] = []
  for (let at = 0; at < count; at += MAX_CHUNK) {
    const indices: number[] = new Array(Math.min(MAX_CHUNK, count - at))
    for (let i = 0; i < indices.length; i++) indices[i] = at + i
    chunks.push({ indices, slotRuns: [] })
  }
  return chunks
}

/**
 * A sync's calls in flight at once per Redis node: enough that the node always has the next one
 * queued while it runs one, few enough that a sync builds each call's arguments as it goes out
 * rather than a million keys' at once.
 */
export const CALLS_IN_FLIGHT = 4

/**
 * The order to send calls in, given each one's node: a call of each node in turn, each node's in
 * their order, so that the nodes of a Cluster work at once; and how many nodes there are.
 */
export function inTurnByNode(nodes: readonly string[]): { order: number[]; nodes: number } {
  const byNode = new Map<string, number[]>()
  nodes.forEach((node, i) => {
    const calls = byNode.get(node)
    if (calls) calls.push(i)
    else byNode.set(node, [i])
  })
  const queues = [...byNode.values()]
  const order: number[] = []
  for (let round = 0; order.length < nodes.length; round++) {
    for (const queue of queues) if (round < queue.length) order.push(queue[round] as number)
  }
  return { order, nodes: queues.length }
}

/**
 * Starts `starts[i]` in `order`, CALLS_IN_FLIGHT per node at once (as many nodes as `order`
 * interleaves): the next starts when one settles. Each promise settles with its start's.
 */
export function startInTurn<T>(
  starts: ReadonlyArray<() => Promise<T>>,
  { order, nodes }: { order: readonly number[]; nodes: number },
): Array<Promise<T>> {
  const settles: Array<{ resolve(value: T): void; reject(error: unknown): void }> = new Array(starts.length)
  const outcomes = starts.map(
    (_, i) =>
      new Promise<T>((resolve, reject) => {
        settles[i] = { resolve, reject }
      }),
  )
  let next = 0
  const startNext = (): void => {
    if (next >= order.length) return
    const i = order[next++] as number
    const settle = settles[i] as { resolve(value: T): void; reject(error: unknown): void }
    let started: Promise<T>
    try {
      started = (starts[i] as () => Promise<T>)()
    } catch (error) {
      started = Promise.reject(error)
    }
    started.then(settle.resolve, settle.reject).finally(startNext)
  }
  for (let i = 0; i < CALLS_IN_FLIGHT * nodes; i++) startNext()
  return outcomes
}

/**
 * A call's keys: their indices, and, for a call that covers several Cluster slots, how many of its
 * keys each slot holds, the keys in slot order (lua/sync.lua reads each slot's keys apart).
 */
export interface Chunk {
  readonly indices: number[]
  /** Keys per slot, in order; empty for keys read together (one server, or one slot). */
  readonly slotRuns: readonly number[]
}

/**
 * A Cluster's `count` keys, by their slots, as chunks of at most MAX_CHUNK, each in the keys'
 * order: with `masterOfSlot`, each chunk keys of one master, whatever their slots (a slot holds
 * about 60 keys of a million: a call per slot would cost more than its keys); without it, keys of
 * one slot. A chunk's keys go in slot order, each slot's together.
 */
export function chunksOf(
  count: number,
  slotOf: (at: number) => number,
  masterOfSlot?: (slot: number) => string | undefined,
): Chunk[] {
  const slots = new Int32Array(count)
  const chunks: Chunk[] = []
  // Keys taken in their order, which is the order the key table holds them in: taken in slot
  // order across the whole sync, a sync read its table out of order, which cost the process more
  // than longer runs of one slot saved Redis (bench/README.md).
  const filling = new Map<string, number[]>()
  for (let at = 0; at < count; at++) {
    const slot = slotOf(at)
    slots[at] = slot
    const node = masterOfSlot?.(slot) ?? `slot ${slot}`
    let indices = filling.get(node)
    if (indices === undefined) {
      indices = []
      filling.set(node, indices)
    }
    indices.push(at)
    if (indices.length === MAX_CHUNK) {
      chunks.push(bySlot(indices, slots))
      filling.delete(node)
    }
  }
  for (const indices of filling.values()) chunks.push(bySlot(indices, slots))
  return chunks
}

/** Above any key's index in a sync: a key's slot and index make one number, which sorts by slot, then index. */
const SLOT_SPAN = 2 ** 32

/** A chunk's keys in slot order, and how many each slot holds; one slot's read together, as off a Cluster. */
function bySlot(indices: number[], slots: Int32Array): Chunk {
  // A typed array sorts its numbers without calling a comparator per comparison.
  const order = new Float64Array(indices.length)
  for (let k = 0; k < indices.length; k++) {
    const at = indices[k] as number
    order[k] = (slots[at] as number) * SLOT_SPAN + at
  }
  order.sort()
  const slotRuns: number[] = []
  let run = 0
  for (let k = 0; k < order.length; k++) {
    const at = (order[k] as number) % SLOT_SPAN
    indices[k] = at
    run++
    if (k + 1 === order.length || Math.floor((order[k + 1] as number) / SLOT_SPAN) !== slots[at]) {
      slotRuns.push(run)
      run = 0
    }
  }
  return { indices, slotRuns: slotRuns.length > 1 ? slotRuns : [] }
}

/**
 * The sync script's items for keys, in order, each as its JSON text: a rule's text before the
 * first entry of a key that follows it, then each key's entry, its count of numbers and its
 * units (none: it is only read). A key's entry is its units alone, so that the text a sync sends,
 * and Redis parses, is about the units it pushes.
 */
export class SyncEntries {
  readonly entries: string[] = []
  private text: string | undefined
  private algorithm: AlgorithmName | undefined
  private windows: readonly Window[] | undefined

  add(algorithm: AlgorithmName, windows: readonly Window[], units: readonly number[] | undefined): void {
    this.rule(algorithm, windows)
    this.entries.push(unitsEntry(units))
  }

  /** A key pushing one segment: `units` admitted at `at`. */
  addSegment(algorithm: AlgorithmName, windows: readonly Window[], at: number, units: number): void {
    this.rule(algorithm, windows)
    this.entries.push(`2,${at},${units}`)
  }

  private rule(algorithm: AlgorithmName, windows: readonly Window[]): void {
    // Keys of a rule come in runs: its text is looked up when the rule changes.
    if (algorithm !== this.algorithm || windows !== this.windows) {
      this.algorithm = algorithm
      this.windows = windows
      const text = ruleTextOf(algorithm, windows)
      if (text !== this.text) {
        this.entries.push(JSON.stringify(text))
        this.text = text
      }
    }
  }
}

/** A key's entry: its count of numbers, then 'at, units, …'; the count negated for a bucket's units folded. */
function unitsEntry(units: readonly number[] | undefined): string {
  if (units === undefined || units.length === 0) return '0'
  // Most keys push one segment: a template, not a join.
  if (units.length === 2) return `2,${units[0]},${units[1]}`
  return `${isFolded(units) ? -units.length : units.length},${units.join(',')}`
}

/** The `sending` units of each of the chunk's keys, as the sync script's entries. */
export function pushEntries(rows: KeyTable, chunk: readonly number[]): string[] {
  const entries = new SyncEntries()
  for (const row of chunk) {
    const shape = rows.shape(row)
    if (rows.units.sendsOneSegment(row)) {
      entries.addSegment(shape.algorithm, shape.windows, rows.units.sendingAtOf(row), rows.units.sendingUnitsOf(row))
    } else entries.add(shape.algorithm, shape.windows, rows.units.sendingOf(row))
  }
  return entries.entries
}

/**
 * The script's KEYS and ARGV for a chunk: `time` is ms or '-' (server TIME); `heartbeat` is
 * `[instancesKey, 'instance ttl']` when the chunk says this process is alive; `operationKey`
 * makes its push apply once however often it is sent (lua/lib/operation.lua); `names` are the
 * chunk's keys in Redis and `entries` theirs in ARGV (`SyncEntries`); `slotRuns` the chunk's
 * (`Chunk`): the keys of its first slot go in KEYS, which Redis and the client route the call by,
 * and the others after ARGV.
 */
export function chunkArguments(
  entries: readonly string[],
  names: readonly string[],
  time: string,
  heartbeat: readonly [string, string] | undefined,
  operationKey: string | undefined,
  slotRuns: readonly number[] = [],
): { keyCount: number; keysAndArgs: string[] } {
  const declared = slotRuns.length > 0 ? (slotRuns[0] as number) : names.length
  const words: string[] = []
  if (heartbeat) words.push(heartbeat[0])
  if (operationKey !== undefined) words.push(operationKey)
  for (let i = 0; i < declared; i++) words.push(names[i] as string)
  const keyCount = words.length
  // One text for every entry: an argument per key would cost the client and Redis as much as the key.
  words.push(
    time,
    heartbeat ? heartbeat[1] : '',
    operationKey === undefined ? '' : '1',
    `[${entries.join(',')}]`,
    slotRuns.length > 0 ? slotRuns.join(',') : '',
  )
  for (let i = declared; i < names.length; i++) words.push(names[i] as string)
  return { keyCount, keysAndArgs: words }
}

/** The script's reply read back for the chunk's `keys`; throws TG_STORE for one that does not parse. */
export function readChunkReply(reply: unknown, keys: readonly string[]): ChunkAnswer {
  const count = keys.length
  const lines = Array.isArray(reply) && typeof reply[2] === 'string' ? reply[2].split('\n') : []
  if (
    !Array.isArray(reply) ||
    lines.length !== count + 1 ||
    (reply.length - 3) % 2 !== 0 ||
    typeof reply[0] !== 'number' ||
    typeof reply[1] !== 'number'
  ) {
    throw new TollgateError('TG_STORE', `unexpected reply from the sync script: ${describeValue(reply)}`)
  }
  const instances = reply[1] as number
  const values: Array<string | TollgateError | Elsewhere> = lines
  lines.pop()
  for (let i = 0; i < count; i++) {
    const text = lines[i] as string
    const mark = text.charCodeAt(0)
    if (mark === 33) {
      // '!': the key alone failed.
      values[i] = new TollgateError('TG_STORE', `the store failed on ${keys[i]}: ${text.slice(1)}`, {
        storeDown: false,
      })
    } else if (mark === 63 && text.length === 1) values[i] = ELSEWHERE_UNPUSHED
    else if (mark === 126 && text.length === 1) values[i] = ELSEWHERE_PUSHED
  }
  let overAdmitted: Map<number, number> | undefined
  for (let at = 3; at < reply.length; at += 2) {
    overAdmitted ??= new Map()
    overAdmitted.set((reply[at] as number) - 1, Number(reply[at + 1]))
  }
  return { serverMs: reply[0] as number, instances: instances >= 0 ? instances : undefined, values, overAdmitted }
}
