import type { Clock } from '../clock.js'
import { describeValue, TollgateConfigError, TollgateError } from '../errors.js'
import { KeyBuilder } from '../keys.js'
import type { AlgorithmName, Window } from '../rules.js'
import { isPlainObject, rejectUnknownKeys } from '../rules.js'
import { decideScript } from '../scripts/generated.js'
import type { Store, StoreRequest, StoreResult, StoreTarget, StoreWindowResult } from './store.js'

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

/** Redis through ioredis: each decision, refund or peek is one EVALSHA, one round trip. */
export class RedisStore implements Store {
  private readonly client: RedisClientLike
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
    const { targets } = request
    const keys: string[] = []
    const args: string[] = [request.operation, String(request.cost), this.clock ? String(this.clock()) : '']
    for (const target of targets) {
      keys.push(this.keyOf(target))
      args.push(...this.argsOf(target))
    }
    const reply = await this.decide(keys.length, ...keys, ...args)
    return parseReply(reply, targets)
  }

  async reset(targets: readonly StoreTarget[]): Promise<void> {
    if (targets.length > 0) await this.client.unlink(...targets.map((target) => this.keyOf(target)))
  }

  close(): Promise<void> {
    return Promise.resolve()
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
