import calculateSlot from 'cluster-key-slot'
import { type Clock, timeFrom } from '../clock.js'
import { describeValue, TollgateConfigError, TollgateError } from '../errors.js'
import { KeyBuilder } from '../keys.js'
import { checkOptionsObject, optionKeys } from '../option-objects.js'
import type { AlgorithmName, Window } from '../rules.js'
import { decideScript } from '../scripts/generated.js'
import { Batches } from './batches.js'
import { ClientErrors, type ErrorEvents } from './client-errors.js'
import type {
  Store,
  StoreOperation,
  StoreReceiver,
  StoreRequest,
  StoreResult,
  StoreTarget,
  StoreWindowResult,
} from './store.js'

/**
 * The part of an ioredis `Redis` or `Cluster` client this store uses. ioredis' `defineCommand`
 * sends EVALSHA and falls back to EVAL only on NOSCRIPT, so scripts survive SCRIPT FLUSH,
 * restarts and failovers without a retry on any other error.
 */
export interface RedisClientLike {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  unlink(...keys: string[]): Promise<number>
  /** How the store hears what Redis said to the client; without `on` and `off` it does not listen. */
  on?(event: 'error' | 'node error', listener: (error: Error) => void): unknown
  off?(event: 'error' | 'node error', listener: (error: Error) => void): unknown
}

export interface RedisStoreOptions {
  /**
   * An ioredis client: `new Redis(…)` (standalone or Sentinel) or `new Cluster(…)`. The store
   * never closes it. It listens to the client's `error` (and `node error`) events until
   * `close()`, so that a decision that times out can say what Redis last said (a refused AUTH,
   * say); ioredis then no longer prints those errors itself, so listen to them too if you log them.
   */
  client: RedisClientLike
  /**
   * Prepended to every key. Must not contain `{` or `}` (Cluster hash tags).
   * @default 'tg:'
   */
  prefix?: string
  /**
   * Where time comes from. By default the Redis server's `TIME`, so that app servers whose
   * clocks disagree still share one timeline; pass a clock where scripts may not call TIME,
   * or in tests. It must return whole milliseconds since the epoch (0 to 8.64e15): a decision
   * whose clock returns anything else fails as a store error, code `TG_STORE`, its message
   * naming the value, and sends nothing to Redis.
   * @default undefined (server time)
   * @example () => Date.now()
   */
  clock?: Clock
}

/** The code the decide script runs an algorithm by: token buckets and GCRA are one model there. */
const SCRIPT_ALGORITHM: Readonly<Record<AlgorithmName, string>> = {
  'sliding-log': 'sl',
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'token-bucket': 'tb',
  gcra: 'tb',
}

const OPTION_KEYS = optionKeys<RedisStoreOptions>({ client: true, prefix: true, clock: true })

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
const COMMAND = `tollgateDecide${decideScript.sha1.slice(0, 12)}`

type DecideCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>

/**
 * Decisions per script call. A batch holds Redis for about its size times one decision's
 * script time, so this bounds what one batch adds to other clients' latency. It also lets the
 * two sides overlap: while Redis runs one batch, the process settles the last one and prepares
 * the next; larger batches kept the process and Redis waiting on each other in turn (measured:
 * bench/README.md).
 */
const MAX_BATCH = 128

interface QueuedRun {
  operation: StoreOperation | 'undo'
  keys: readonly string[]
  targets: readonly StoreTarget[]
  cost: number
  /** Milliseconds, or '-' for the server's TIME. */
  time: string
  revertable: boolean
  receiver: StoreReceiver
}

/**
 * Redis through ioredis: each decision, refund or peek is decided in one round trip. The
 * decisions a process makes in the same turn of its event loop travel together, as one EVALSHA of at most
 * MAX_BATCH decisions (per slot on a Cluster): one socket write and one script call for all of
 * them, each still decided atomically on its own, in call order, and one failing on a bad key
 * fails alone (its error has `storeDown: false`, so the limiter's circuit breaker ignores it).
 * A lone decision is sent at the end of the turn, never held for a timer.
 *
 * On a Cluster, an identifier's keys share its hash tag, so a decision for one identifier is one
 * script on one slot. A consume whose identifiers hash to several slots charges them one after
 * another in ascending slot order, each atomically; at the first slot that refuses it stops,
 * undoes the charges of the slots before it, and peeks at the slots after it for their windows.
 * A slot thus only sees consumes that every lower slot admitted, and concurrent consumes of the
 * same identifiers are admitted exactly up to the limit. The price is a round trip per extra
 * slot, and units left charged until they expire if the process dies between a charge and its
 * undo. Decisions that share only some identifiers can still be refused on units held for one
 * that a later slot then refuses (see docs/production.md). A peek or a refund asks every slot
 * at once.
 */
export class RedisStore implements Store {
  private readonly client: RedisClientLike
  private readonly cluster: boolean
  private readonly keys: KeyBuilder
  private readonly clock: Clock | undefined
  private readonly runScript: DecideCommand
  private readonly specs = new WeakMap<readonly Window[], string>()
  private readonly batches: Batches<QueuedRun>
  private readonly errors: ClientErrors | undefined
  private closed = false

  constructor(options: RedisStoreOptions) {
    checkOptionsObject(options, OPTION_KEYS, 'RedisStore options', { shape: '{ client }' })
    const { client, prefix = 'tg:', clock } = options
    if (client === null || typeof client !== 'object' || typeof client.defineCommand !== 'function') {
      throw new TollgateConfigError(
        `RedisStore option client must be an ioredis Redis or Cluster client, got ${describeValue(client)}`,
      )
    }
    if (clock !== undefined && typeof clock !== 'function') {
      throw new TollgateConfigError(`RedisStore option clock must be a function, got ${describeValue(clock)}`)
    }
    this.client = client
    this.cluster = (client as { isCluster?: unknown }).isCluster === true
    this.keys = new KeyBuilder(prefix)
    this.clock = clock
    const commands = client as unknown as Record<string, DecideCommand | undefined>
    if (typeof commands[COMMAND] !== 'function') client.defineCommand(COMMAND, { lua: decideScript.lua })
    this.runScript = (commands[COMMAND] as DecideCommand).bind(client)
    this.batches = new Batches(MAX_BATCH, (runs) => this.send(runs))
    this.errors =
      typeof client.on === 'function' && typeof client.off === 'function'
        ? ClientErrors.of(client as ErrorEvents)
        : undefined
  }

  /** The key that holds a target's state: useful to inspect it with redis-cli. */
  keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }

  evaluate(request: StoreRequest): Promise<StoreResult> {
    return new Promise((resolve, reject) => this.evaluateInto(request, { answer: resolve, fail: reject }))
  }

  evaluateInto(request: StoreRequest, receiver: StoreReceiver): void {
    const { operation, targets, cost } = request
    const keys: string[] = []
    for (const target of targets) keys.push(this.keyOf(target))
    let time = '-'
    if (this.clock) {
      try {
        time = String(timeFrom(this.clock, 'RedisStore'))
      } catch (error) {
        receiver.fail(error)
        return
      }
    }
    if (this.cluster) {
      const slots = groupBySlot(keys)
      if (slots.length > 1) {
        this.acrossSlots(request, keys, slots, time).then(
          (result) => receiver.answer(result),
          (error: unknown) => receiver.fail(error),
        )
        return
      }
    }
    const group = this.cluster ? calculateSlot(keys[0] as string) : 0
    this.batches.add(group, { operation, keys, targets, cost, time, revertable: true, receiver })
  }

  async reset(targets: readonly StoreTarget[]): Promise<void> {
    if (targets.length === 0) return
    const keys = targets.map((target) => this.keyOf(target))
    const slots = this.cluster ? groupBySlot(keys) : [keys.map((_, i) => i)]
    await Promise.all(slots.map((indices) => this.client.unlink(...indices.map((i) => keys[i] as string))))
    this.errors?.answered()
  }

  recentError(): Error | undefined {
    return this.errors?.recent
  }

  /** Stops listening to the client's errors; the client stays open. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true
      this.errors?.release()
    }
    return Promise.resolve()
  }

  /**
   * Queues one script run, all its keys in one slot, for the next batch of that slot: a part of
   * a decision split over slots, or an undo. Such a part is never `revertable` on its own: it is
   * reverted with the whole decision.
   */
  private run(
    operation: StoreOperation | 'undo',
    keys: readonly string[],
    targets: readonly StoreTarget[],
    cost: number,
    time: string,
  ): Promise<StoreResult> {
    return new Promise<StoreResult>((resolve, reject) => {
      // A Cluster runs a script on one slot only; elsewhere every run fits in one batch.
      const group = this.cluster ? calculateSlot(keys[0] as string) : 0
      const receiver = { answer: resolve, fail: reject }
      this.batches.add(group, { operation, keys, targets, cost, time, revertable: false, receiver })
    })
  }

  private send(runs: readonly QueuedRun[]): void {
    const keysAndArgs: string[] = []
    for (const run of runs) for (const key of run.keys) keysAndArgs.push(key)
    const keyCount = keysAndArgs.length
    for (const run of runs) keysAndArgs.push(this.scriptArgumentOf(run))
    let reply: Promise<unknown>
    try {
      reply = this.runScript(keyCount, ...keysAndArgs)
    } catch (error) {
      for (const run of runs) run.receiver.fail(error)
      return
    }
    reply.then(
      (replies) => {
        this.errors?.answered()
        // One flat array: per run, its numbers, or one string for the error that failed it alone.
        let at = 0
        let i = 0
        if (Array.isArray(replies)) {
          for (; i < runs.length; i++) {
            const run = runs[i] as QueuedRun
            const first: unknown = replies[at]
            if (typeof first === 'string' || Buffer.isBuffer(first)) {
              run.receiver.fail(decisionFailure(run.keys, String(first)))
              at += 1
              continue
            }
            const width = widthOf(run.targets)
            if (at + width > replies.length) break
            this.deliver(run, replies as number[], at, width)
            at += width
          }
        }
        if (!Array.isArray(replies) || i < runs.length || at !== replies.length) {
          const error = new TollgateError(
            'TG_STORE',
            `unexpected reply from the decide script: ${describeValue(replies)}`,
          )
          for (; i < runs.length; i++) (runs[i] as QueuedRun).receiver.fail(error)
        }
      },
      (error: unknown) => {
        for (const run of runs) run.receiver.fail(error)
      },
    )
  }

  private async acrossSlots(
    request: StoreRequest,
    keys: readonly string[],
    slots: readonly number[][],
    time: string,
  ): Promise<StoreResult> {
    const { operation, targets, cost } = request
    const parts = slots.map((indices) => ({
      indices,
      keys: indices.map((i) => keys[i] as string),
      targets: indices.map((i) => targets[i] as StoreTarget),
    }))
    if (operation !== 'consume' || cost === 0) {
      // Nothing is charged that another slot could refuse: every slot at once.
      const results = await Promise.all(parts.map((part) => this.run(operation, part.keys, part.targets, cost, time)))
      return mergeSlots(
        parts,
        results,
        results.every((result) => result.allowed),
        targets.length,
      )
    }
    // Slot after slot, so that a slot is only asked once every slot before it has admitted.
    // Asked all at once, a slot would refuse concurrent decisions on units held by charges about
    // to be undone, and admit fewer than the limit.
    const charged: StoreResult[] = []
    let refusal: StoreResult | undefined
    try {
      for (const part of parts) {
        const result = await this.run('consume', part.keys, part.targets, cost, time)
        if (!result.allowed) {
          refusal = result
          break
        }
        charged.push(result)
      }
    } catch (error) {
      // A failed undo leaves units charged until they expire: quota lost, never a limit exceeded.
      await Promise.allSettled(this.undoParts(parts, charged, cost))
      throw error
    }
    if (refusal === undefined) {
      const merged = mergeSlots(parts, charged, true, targets.length)
      merged.revert = async () => {
        await Promise.all(this.undoParts(parts, charged, cost))
      }
      return merged
    }
    // The slots after the refusing one were never charged; a peek gives their windows, which
    // the decision reports too (and which say whether they would have refused as well).
    const unasked = parts.slice(charged.length + 1)
    const [undone, peeked] = await Promise.all([
      Promise.all(this.undoParts(parts, charged, cost).map((undo, i) => undo.catch(() => charged[i] as StoreResult))),
      Promise.all(unasked.map((part) => this.run('peek', part.keys, part.targets, cost, time))),
    ])
    return mergeSlots(parts, [...undone, refusal, ...peeked], false, targets.length)
  }

  /** Takes back `charged[i]` on `parts[i]`, every slot at once; each answers its slot's state after. */
  private undoParts(
    parts: ReadonlyArray<{ keys: readonly string[]; targets: readonly StoreTarget[] }>,
    charged: readonly StoreResult[],
    cost: number,
  ): Array<Promise<StoreResult>> {
    return charged.map((result, i) => {
      const part = parts[i] as (typeof parts)[number]
      return this.run('undo', part.keys, part.targets, cost, String(result.nowMs))
    })
  }

  /** A charged run's undo, one function for every ChargedResult rather than a closure each. */
  private readonly undoRun = (run: QueuedRun, nowMs: number) => this.undo(run.keys, run.targets, run.cost, nowMs)

  /** Takes back a consume charged at `nowMs` (the time its script ran) on these keys. */
  private async undo(
    keys: readonly string[],
    targets: readonly StoreTarget[],
    cost: number,
    nowMs: number,
  ): Promise<void> {
    await this.run('undo', keys, targets, cost, String(nowMs))
  }

  /** `operation cost now spec|spec…`: the decide script's one argument per decision. */
  private scriptArgumentOf(run: QueuedRun): string {
    let header = `${run.operation} ${run.cost} ${run.time} ${this.specOf(run.targets[0] as StoreTarget)}`
    for (let i = 1; i < run.targets.length; i++) header += `|${this.specOf(run.targets[i] as StoreTarget)}`
    return header
  }

  /** Resolves a run with its `width` numbers, `replies[at]` onwards. */
  private deliver(run: QueuedRun, replies: readonly number[], at: number, width: number): void {
    const windows = windowsOf(replies, at + 1, (width - 1) / 3)
    // The script's time, doubled, plus 1 when allowed: one integer where two would cost more.
    const head = replies[at] as number
    const allowed = head % 2 === 1
    const nowMs = allowed ? (head - 1) / 2 : head / 2
    run.receiver.answer(
      run.revertable && run.operation === 'consume' && allowed && run.cost > 0
        ? new ChargedResult(nowMs, windows, run, this.undoRun)
        : { allowed, nowMs, windows },
    )
  }

  /** A rule's windows always encode to the same spec; encode it once. */
  private specOf(target: StoreTarget): string {
    let spec = this.specs.get(target.windows)
    if (spec === undefined) {
      spec = SCRIPT_ALGORITHM[target.algorithm]
      for (const window of target.windows) spec += ` ${window.limit} ${window.periodMs}`
      this.specs.set(target.windows, spec)
    }
    return spec
  }
}

/** The keys' indices grouped by slot, in ascending slot order: the order a consume charges slots in. */
function groupBySlot(keys: readonly string[]): number[][] {
  const bySlot = new Map<number, number[]>()
  keys.forEach((key, i) => {
    const slot = calculateSlot(key)
    const group = bySlot.get(slot)
    if (group) group.push(i)
    else bySlot.set(slot, [i])
  })
  return [...bySlot.entries()].sort(([a], [b]) => a - b).map(([, indices]) => indices)
}

/**
 * What one decision met inside the script: a server-wide refusal (OOM, READONLY…) says the store
 * is down; anything else (a key holding the wrong type) concerns that decision's keys alone.
 */
function decisionFailure(keys: readonly string[], said: string): TollgateError {
  const code = /^[A-Z]+(?= )/.exec(said)?.[0] ?? ''
  return new TollgateError('TG_STORE', `the store failed on ${keys.join(', ')}: ${said}`, {
    storeDown: SERVER_DOWN_CODES.has(code),
  })
}

/** Puts per-slot answers back in target order, on the first slot's clock (nodes' clocks may differ). */
function mergeSlots(
  parts: ReadonlyArray<{ indices: readonly number[]; targets: readonly StoreTarget[] }>,
  results: readonly StoreResult[],
  allowed: boolean,
  targetCount: number,
): StoreResult {
  const nowMs = (results[0] as StoreResult).nowMs
  const byTarget: StoreWindowResult[][] = new Array(targetCount)
  parts.forEach((part, p) => {
    const result = results[p] as StoreResult
    const shift = nowMs - result.nowMs
    let w = 0
    part.indices.forEach((targetIndex, t) => {
      const windows = (part.targets[t] as StoreTarget).windows.length
      byTarget[targetIndex] = result.windows.slice(w, w + windows).map((window) => ({
        remaining: window.remaining,
        resetAtMs: window.resetAtMs + shift,
        fitsAtMs: window.fitsAtMs + shift,
      }))
      w += windows
    })
  })
  return { allowed, nowMs, windows: byTarget.flat() }
}

/** The numbers a run's reply holds: allowed with now, then three per window of each target. */
function widthOf(targets: readonly StoreTarget[]): number {
  let width = 1
  for (const target of targets) width += 3 * target.windows.length
  return width
}

/** The answer to a consume that charged: it can take exactly that charge back. */
class ChargedResult implements StoreResult {
  readonly allowed = true

  constructor(
    readonly nowMs: number,
    readonly windows: StoreWindowResult[],
    private readonly run: QueuedRun,
    private readonly undoRun: (run: QueuedRun, nowMs: number) => Promise<void>,
  ) {}

  revert(): Promise<void> {
    return this.undoRun(this.run, this.nowMs)
  }
}

function windowsOf(values: readonly number[], at: number, windowCount: number): StoreWindowResult[] {
  const windows: StoreWindowResult[] = []
  for (let w = 0, i = at; w < windowCount; w++, i += 3) {
    const fitsAt = values[i + 2] as number
    const remaining = values[i] as number | string
    windows.push({
      // Text when it is within 128 of 2^53 (lua/lib/reply.lua), which RESP3 clients would round.
      remaining: typeof remaining === 'number' ? remaining : Number(remaining),
      resetAtMs: values[i + 1] as number,
      fitsAtMs: fitsAt < 0 ? Number.POSITIVE_INFINITY : fitsAt,
    })
  }
  return windows
}
