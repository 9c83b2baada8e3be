import { TollgateError } from '../errors.js'
import { publishRulesScript, readRulesScript } from '../scripts/generated.js'
import type { StoredRule } from './overrides.js'

/**
 * The part of an ioredis `Redis` or `Cluster` client live rules use. Scripts go through
 * `defineCommand`, EVALSHA falling back to EVAL only on NOSCRIPT, as the stores' do.
 */
export interface LiveRulesClient {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  get(key: string): Promise<string | null>
  lrange(key: string, start: number, stop: number): Promise<string[]>
  /** A new connection with the same options, for the subscription that hears publishes. */
  duplicate?(): unknown
}

/** The subscriber connection: what an ioredis client in subscriber mode offers. */
interface Subscriber {
  subscribe(channel: string): Promise<unknown>
  on(event: 'message', listener: (channel: string, message: string) => void): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'ready', listener: () => void): unknown
  disconnect(): void
}

/** The versions a history keeps: the last 200 publishes, whatever rules each changed. */
export const HISTORY_LENGTH = 200

/**
 * Key layout, all under one hash tag so that a Cluster keeps them in one slot and a publish is
 * one script: `<prefix>{rules}:epoch` (the number of publishes), `:current` (hash: rule name →
 * options JSON), `:changed` (sorted set: rule name → the epoch that last changed it, dropped
 * overrides included, so that a reader asks only for what changed since its epoch), `:history`
 * (list, newest first). Publishes are announced on the channel `<prefix>{rules}:nudge`. These
 * keys have no TTL: they are configuration, not state.
 */
export class RulesKeys {
  readonly epoch: string
  readonly current: string
  readonly changed: string
  readonly history: string
  readonly channel: string

  constructor(prefix: string) {
    const base = `${prefix}{rules}:`
    this.epoch = `${base}epoch`
    this.current = `${base}current`
    this.changed = `${base}changed`
    this.history = `${base}history`
    this.channel = `${base}nudge`
  }
}

export interface ReadReply {
  readonly epoch: number
  /** The reply names every rule ever overridden: an override it does not name is gone. */
  readonly whole: boolean
  readonly rules: StoredRule[]
}

export type PublishReply =
  | { readonly published: true; readonly epoch: number }
  | { readonly published: false; readonly found: number }

type ScriptCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>

const PUBLISH = `tollgatePublishRules${publishRulesScript.sha1.slice(0, 12)}`
const READ = `tollgateReadRules${readRulesScript.sha1.slice(0, 12)}`

/** Live rules' reads and writes in Redis; every failure rejects as a `TG_STORE` error. */
export class RedisRules {
  readonly keys: RulesKeys
  private readonly publishScript: ScriptCommand
  private readonly readScript: ScriptCommand

  constructor(
    private readonly client: LiveRulesClient,
    prefix: string,
  ) {
    this.keys = new RulesKeys(prefix)
    this.publishScript = command(client, PUBLISH, publishRulesScript.lua)
    this.readScript = command(client, READ, readRulesScript.lua)
  }

  async epoch(): Promise<number> {
    const text = await failingAsStore(() => this.client.get(this.keys.epoch), 'read the epoch')
    return epochOf(text)
  }

  async readSince(epoch: number): Promise<ReadReply> {
    const { keys } = this
    const reply = await failingAsStore(
      () => this.readScript(3, keys.epoch, keys.current, keys.changed, String(epoch)),
      'read the rules',
    )
    if (!Array.isArray(reply) || reply.length < 2 || (reply.length - 2) % 3 !== 0) throw unexpected(reply)
    const rules: StoredRule[] = []
    for (let i = 2; i < reply.length; i += 3) {
      const text: unknown = reply[i + 1]
      rules.push({ rule: String(reply[i]), text: text === null ? null : String(text), epoch: Number(reply[i + 2]) })
    }
    return { epoch: Number(reply[0]), whole: Number(reply[1]) === 1, rules }
  }

  /** `changes`: rule name and options JSON, or '' to drop the override. */
  async publish(
    expected: number,
    changes: ReadonlyArray<readonly [string, string]>,
    historyFields: string,
  ): Promise<PublishReply> {
    const { keys } = this
    const reply = await failingAsStore(
      () =>
        this.publishScript(
          4,
          keys.epoch,
          keys.current,
          keys.changed,
          keys.history,
          String(expected),
          keys.channel,
          String(HISTORY_LENGTH),
          historyFields,
          ...changes.flat(),
        ),
      'publish',
    )
    if (!Array.isArray(reply) || reply.length !== 2) throw unexpected(reply)
    const epoch = Number(reply[1])
    return Number(reply[0]) === 1 ? { published: true, epoch } : { published: false, found: epoch }
  }

  /** The history's entries, newest first. */
  history(): Promise<string[]> {
    return failingAsStore(() => this.client.lrange(this.keys.history, 0, -1), 'read the history')
  }

  /**
   * Listens for publishes on a connection of its own (`client.duplicate()`): `heard` gets each
   * epoch announced, and is called with no epoch whenever the subscription is (again) in place,
   * since announcements made while it was not were lost. Undefined when the client cannot duplicate.
   */
  subscribe(heard: (epoch?: number) => void, failed: (error: Error) => void): (() => void) | undefined {
    if (typeof this.client.duplicate !== 'function') return undefined
    const subscriber = this.client.duplicate() as Subscriber
    const { channel } = this.keys
    subscriber.on('error', failed)
    subscriber.on('message', (from, message) => {
      if (from !== channel) return
      // An announcement that is not an epoch still says that something changed.
      const epoch = Number(message)
      heard(Number.isSafeInteger(epoch) ? epoch : undefined)
    })
    // ioredis subscribes again by itself on every reconnection, then emits 'ready'.
    subscriber.on('ready', () => heard())
    subscriber.subscribe(channel).then(
      () => heard(),
      (error: unknown) => failed(error instanceof Error ? error : new Error(String(error))),
    )
    return () => subscriber.disconnect()
  }
}

function command(client: LiveRulesClient, name: string, lua: string): ScriptCommand {
  const commands = client as unknown as Record<string, ScriptCommand | undefined>
  if (typeof commands[name] !== 'function') client.defineCommand(name, { lua })
  return (commands[name] as ScriptCommand).bind(client)
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
