import { randomBytes } from 'node:crypto'
import type { RedisConnection, ScriptCommand } from '../redis-clients/connection.js'
import { publishRulesScript, readRulesScript } from '../scripts/generated.js'
import { TollgateConfigError, TollgateError } from '../support/errors.js'
import type { Override, StoredRule } from './overrides.js'

/**
 * The part of an ioredis `Redis` or `Cluster` client live rules use; a node-redis client serves
 * as well (`NodeRedisClientLike`). Scripts go by EVALSHA, falling back to EVAL only on NOSCRIPT,
 * as the stores' do.
 */
export interface LiveRulesClient {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  get(key: string): Promise<string | null>
  lrange(key: string, start: number, stop: number): Promise<string[]>
  /** A new connection with the same options, for the subscription that hears publishes. */
  duplicate?(): unknown
}

/** The versions a history keeps: the last 200 publishes, whatever rules each changed. The ids hash keeps as many epochs. */
export const HISTORY_LENGTH = 200

/**
 * The most characters of rule names and options one publish carries. It goes to Redis as one
 * argument, which Redis refuses past `proto-max-bulk-len` (512 MiB unless configured), and its
 * history entry, one Redis string too, holds every rule's options twice (published and replaced),
 * escaped as JSON strings: this leaves both within that with room to spare.
 */
export const MAX_PUBLISH_CHARACTERS = 128 * 1024 * 1024

/**
 * Key layout, all under one hash tag so that a Cluster keeps them in one slot and a publish is
 * one script: `<prefix>{rules}:epoch` (the number of publishes), `:ids` (hash: epoch → the random
 * id of the publish that made it, so that a process can tell the epoch it holds from another
 * publish's under the same number), `:current` (hash: rule name → options JSON), `:changed`
 * (sorted set: rule name → the epoch that last changed it, dropped overrides included, so that a
 * reader asks only for what changed since its epoch), `:history` (list, newest first). Publishes
 * are announced on the channel `<prefix>{rules}:nudge`. These keys have no TTL: they are
 * configuration, not state.
 */
export class RulesKeys {
  readonly epoch: string
  readonly ids: string
  readonly current: string
  readonly changed: string
  readonly history: string
  readonly channel: string

  constructor(prefix: string) {
    const base = `${prefix}{rules}:`
    this.epoch = `${base}epoch`
    this.ids = `${base}ids`
    this.current = `${base}current`
    this.changed = `${base}changed`
    this.history = `${base}history`
    this.channel = `${base}nudge`
  }
}

/** Which rule set: its epoch, and the id of the publish that made it ('' when none was recorded). */
export interface RulesStamp {
  readonly epoch: number
  readonly id: string
}

/**
 * Why a read lists every rule rather than those changed since the reader's epoch: `new`, the
 * reader held epoch 0 or one too old to check; `lost`, Redis does not hold the publish the reader
 * holds (it is past Redis's epoch, or another publish made that epoch).
 */
export type WholeRead = 'new' | 'lost'

export interface ReadReply extends RulesStamp {
  /** Set when the reply names every rule ever overridden: an override it does not name is gone. */
  readonly whole: WholeRead | undefined
  readonly rules: StoredRule[]
}

export type PublishReply =
  | { readonly published: true; readonly epoch: number }
  | { readonly published: false; readonly found: number }

const WHOLE_READS: ReadonlyArray<WholeRead | undefined> = [undefined, 'new', 'lost']

/** Live rules' reads and writes in Redis; every failure rejects as a `TG_STORE` error. */
export class RedisRules {
  readonly keys: RulesKeys
  private readonly publishScript: ScriptCommand
  private readonly readScript: ScriptCommand

  constructor(
    private readonly connection: RedisConnection,
    prefix: string,
  ) {
    this.keys = new RulesKeys(prefix)
    this.publishScript = connection.script(publishRulesScript)
    this.readScript = connection.script(readRulesScript)
  }

  async epoch(): Promise<number> {
    const text = await failingAsStore(() => this.connection.get(this.keys.epoch), 'read the epoch')
    return epochOf(text)
  }

  /** What changed since the rule set `held`, or every rule when Redis does not hold it (ReadReply.whole). */
  async readSince(held: RulesStamp): Promise<ReadReply> {
    const { keys } = this
    const reply = await failingAsStore(
      () =>
        this.readScript(
          4,
          keys.epoch,
          keys.current,
          keys.changed,
          keys.ids,
          String(held.epoch),
          held.id,
          String(HISTORY_LENGTH),
        ),
      'read the rules',
    )
    if (!Array.isArray(reply) || reply.length < 3 || (reply.length - 3) % 3 !== 0) throw unexpected(reply)
    const whole = WHOLE_READS[Number(reply[2])]
    if (whole === undefined && Number(reply[2]) !== 0) throw unexpected(reply)
    const rules: StoredRule[] = []
    for (let i = 3; i < reply.length; i += 3) {
      const text: unknown = reply[i + 1]
      rules.push({ rule: String(reply[i]), text: text === null ? null : String(text), epoch: Number(reply[i + 2]) })
    }
    return { epoch: epochOf(reply[0]), id: String(reply[1]), whole, rules }
  }

  /**
   * Publishes `payload` (publishPayloadOf) on top of `base`, as the publish `id` (publishIdOf):
   * written only if Redis still holds `base`.
   */
  async publish(base: RulesStamp, id: string, payload: string, historyFields: string): Promise<PublishReply> {
    const { keys } = this
    const reply = await failingAsStore(
      () =>
        this.publishScript(
          5,
          keys.epoch,
          keys.current,
          keys.changed,
          keys.history,
          keys.ids,
          String(base.epoch),
          base.id,
          id,
          keys.channel,
          String(HISTORY_LENGTH),
          historyFields,
          payload,
        ),
      'publish',
    )
    if (!Array.isArray(reply) || reply.length !== 2) throw unexpected(reply)
    const epoch = Number(reply[1])
    return Number(reply[0]) === 1 ? { published: true, epoch } : { published: false, found: epoch }
  }

  /** The history's entries, newest first. */
  history(): Promise<string[]> {
    return failingAsStore(() => this.connection.lrange(this.keys.history, 0, -1), 'read the history')
  }

  /**
   * Listens for publishes on a connection of its own (`client.duplicate()`): `heard` gets the
   * stamp of each publish announced, and is called with none whenever the subscription is (again) in place,
   * since announcements made while it was not were lost. Undefined when the client cannot duplicate.
   */
  subscribe(heard: (stamp?: RulesStamp) => void, failed: (error: Error) => void): (() => void) | undefined {
    return this.connection.subscribe?.(this.keys.channel, {
      message(text) {
        // '<epoch> <id>'; an announcement that is not one still says that something changed.
        const [epochText = '', id, ...rest] = text.split(' ')
        const epoch = /^[0-9]+$/.test(epochText) ? Number(epochText) : Number.NaN
        heard(Number.isSafeInteger(epoch) && id !== undefined && rest.length === 0 ? { epoch, id } : undefined)
      },
      subscribed: () => heard(),
      failed,
    })
  }
}

/** A new publish's id: random, so that no two publishes share one, whatever epoch each makes. */
export function publishIdOf(): string {
  return randomBytes(8).toString('hex')
}

/**
 * A publish's changes as publish_rules.lua takes them: one JSON array of strings, rule name then
 * options JSON ('' to drop the override). Throws TG_CONFIG, writing nothing, for more than one
 * publish carries.
 */
export function publishPayloadOf(
  changes: ReadonlyArray<readonly [string, Override | null]>,
  limit = MAX_PUBLISH_CHARACTERS,
): string {
  const strings: string[] = []
  let characters = 0
  for (const [name, override] of changes) {
    const text = override?.text ?? ''
    characters += name.length + text.length
    strings.push(name, text)
  }
  if (characters > limit) {
    throw new TollgateConfigError(
      `publish of ${changes.length} rules carries ${characters} characters of rule names and options; one publish carries at most ${limit}: publish them in several parts`,
    )
  }
  return JSON.stringify(strings)
}

/** An epoch as stored: a count of publishes; a missing key is epoch 0. */
function epochOf(text: unknown): number {
  if (text === null || text === undefined) return 0
  const epoch = Number(text)
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw unexpected(text)
  return epoch
}

async function failingAsStore<T>(work: () => Promise<T>, what: string): Promise<T> {
  try {
    return await work()
  } catch (cause) {
    throw new TollgateError(
      'TG_STORE',
      `live rules could not ${what} in Redis: ${(cause as Error)?.message ?? cause}`,
      {
        cause,
      },
    )
  }
}

function unexpected(reply: unknown): TollgateError {
  return new TollgateError('TG_STORE', `live rules got an unexpected reply from Redis: ${JSON.stringify(reply)}`)
}
