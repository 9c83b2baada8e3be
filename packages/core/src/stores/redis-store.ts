import calculateSlot from 'cluster-key-slot'
import type { Clock } from '../clock.js'
import { describeValue, TollgateConfigError, TollgateError } from '../errors.js'
import { KeyBuilder } from '../keys.js'
import type { AlgorithmName, Window } from '../rules.js'
import { isPlainObject, rejectUnknownKeys } from '../rules.js'
import { decideScript } from '../scripts/generated.js'
import type { Store, StoreOperation, StoreRequest, StoreResult, StoreTarget, StoreWindowResult } from './store.js'

/**
 * The part of an ioredis `Redis` or `Cluster` client this store uses. ioredis' `defineCommand`
 * sends EVALSHA and falls back to EVAL only on NOSCRIPT, so scripts survive SCRIPT FLUSH,
 * restarts and failovers without a retry on any other error.
 */
export interface RedisClientLike {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  unlink(...keys: string[]): Promise<number>
}

export interface RedisStoreOptions {
  /** An ioredis client: `new Redis(…)` (standalone or Sentinel) or `new Cluster(…)`. The store never closes it. */
  client: RedisClientLike
  /**
   * Prepended to every key. Must not contain `{` or `}` (Cluster hash tags).
   * @default 'tg:'
   */
  prefix?: string
  /**
   * Where time comes from. By default the Redis server's `TIME`, so that app servers whose
   * clocks disagree still share one timeline; pass a clock where scripts may not call TIME,
   * or in tests.
   * @default undefined (server time)
   */
  clock?: Clock
}

const ALGORITHM_CODE: Readonly<Record<AlgorithmName, string>> = {
  'sliding-log': 'sl',
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'token-bucket': 'tb',
  gcra: 'tb',
}

const OPTION_KEYS = new Set(['client', 'prefix', 'clock'])
const COMMAND = `tollgateDecide${decideScript.sha1.slice(0, 12)}`

type DecideCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>

/**
 * Redis through ioredis: each decision, refund or peek is one EVALSHA, one round trip.
 *
 * On a Cluster, an identifier's keys share its hash tag, so a decision for one identifier is one
 * script on one slot. A decision whose identifiers hash to several slots runs as one script per
 * slot, all sent at once; if any slot refuses, the slots that charged are sent an exact `undo`
 * of that charge. Each slot checks and charges atomically, so nothing is ever over-admitted;
 * the price is that a refused decision holds its units on the other slots for one more round
 * trip (concurrent decisions may see less room meanwhile), and holds them until they expire if
 * the process dies in between.
 */
export class RedisStore implements Store {
  private readonly client: RedisClientLike
  private readonly cluster: boolean
  private readonly keys: KeyBuilder
  private readonly clock: Clock | undefined
  private readonly decide: DecideCommand
  /** A rule's windows always encode to the same arguments; encode them once. */
  private readonly windowArgs = new WeakMap<readonly Window[], string[]>()

  constructor(options: RedisStoreOptions) {
    const raw: unknown = options
    if (!isPlainObject(raw)) {
      throw new TollgateConfigError(`RedisStore options must be an object { client }, got ${describeValue(raw)}`)
    }
    rejectUnknownKeys(raw, OPTION_KEYS, 'RedisStore')
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
    this.decide = (commands[COMMAND] as DecideCommand).bind(client)
  }

  /** The key that holds a target's state: useful to inspect it with redis-cli. */
  keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }

  async evaluate(request: StoreRequest): Promise<StoreResult> {
    const keys = request.targets.map((target) => this.keyOf(target))
    const time = this.clock ? String(this.clock()) : ''
    const slots = this.cluster ? groupBySlot(keys) : []
    if (slots.length > 1) return this.acrossSlots(request, keys, slots, time)
    const result = await this.run(request.operation, keys, request.targets, request.cost, time)
    if (request.operation === 'consume' && result.allowed && request.cost > 0) {
      result.revert = () => this.undo(keys, request.targets, request.cost, result.nowMs)
    }
    return result
  }

  async reset(targets: readonly StoreTarget[]): Promise<void> {
    if (targets.length === 0) return
    const keys = targets.map((target) => this.keyOf(target))
    const slots = this.cluster ? groupBySlot(keys) : [keys.map((_, i) => i)]
    await Promise.all(slots.map((indices) => this.client.unlink(...indices.map((i) => keys[i] as string))))
  }

  close(): Promise<void> {
    return Promise.resolve()
  }

  private async run(
    operation: StoreOperation | 'undo',
    keys: readonly string[],
    targets: readonly StoreTarget[],
    cost: number,
    time: string,
  ): Promise<StoreResult> {
    const args: string[] = [operation, String(cost), time]
    for (const target of targets) args.push(...this.argsOf(target))
    return parseReply(await this.decide(keys.length, ...keys, ...args), targets)
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
    const settled = await Promise.allSettled(
      parts.map((part) => this.run(operation, part.keys, part.targets, cost, time)),
    )
    const results: Array<StoreResult | undefined> = settled.map((r) => (r.status === 'fulfilled' ? r.value : undefined))
    const allowed = results.every((result) => result?.allowed === true)
    if (operation === 'consume' && !allowed && cost > 0) {
      await Promise.all(
        parts.map(async (part, i) => {
          const charged = results[i]
          if (!charged?.allowed) return
          // A failed undo leaves the units charged until they expire: a refusal that costs
          // quota, never an admission that exceeds it, so the refusal stands.
          const undone = await this.run('undo', part.keys, part.targets, cost, String(charged.nowMs)).catch(
            () => charged,
          )
          results[i] = undone
        }),
      )
    }
    const failure = settled.find((r) => r.status === 'rejected')
    if (failure) throw (failure as PromiseRejectedResult).reason
    const merged = mergeSlots(parts, results as StoreResult[], allowed, targets.length)
    if (operation === 'consume' && allowed && cost > 0) {
      merged.revert = async () => {
        await Promise.all(
          parts.map((part, i) => this.undo(part.keys, part.targets, cost, (results[i] as StoreResult).nowMs)),
        )
      }
    }
    return merged
  }

  /** Takes back a consume charged at `nowMs` (the time its script ran) on these keys. */
  private async undo(
    keys: readonly string[],
    targets: readonly StoreTarget[],
    cost: number,
    nowMs: number,
  ): Promise<void> {
    await this.run('undo', keys, targets, cost, String(nowMs))
  }

  private argsOf(target: StoreTarget): string[] {
    let args = this.windowArgs.get(target.windows)
    if (!args) {
      args = [ALGORITHM_CODE[target.algorithm], String(target.windows.length)]
      for (const window of target.windows) args.push(String(window.limit), String(window.periodMs))
      this.windowArgs.set(target.windows, args)
    }
    return args
  }
}

function groupBySlot(keys: readonly string[]): number[][] {
  const bySlot = new Map<number, number[]>()
  keys.forEach((key, i) => {
    const slot = calculateSlot(key)
    const group = bySlot.get(slot)
    if (group) group.push(i)
    else bySlot.set(slot, [i])
  })
  return [...bySlot.values()]
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

function parseReply(reply: unknown, targets: readonly StoreTarget[]): StoreResult {
  let expected = 2
  for (const target of targets) expected += 3 * target.windows.length
  if (!Array.isArray(reply) || reply.length !== expected) {
    throw new TollgateError('TG_STORE', `unexpected reply from the decide script: ${describeValue(reply)}`)
  }
  const values = reply as number[]
  const windows: StoreWindowResult[] = []
  for (let i = 2; i < expected; i += 3) {
    const fitsAt = values[i + 2] as number
    windows.push({
      remaining: values[i] as number,
      resetAtMs: values[i + 1] as number,
      fitsAtMs: fitsAt < 0 ? Number.POSITIVE_INFINITY : fitsAt,
    })
  }
  return { allowed: values[0] === 1, nowMs: values[1] as number, windows }
}
