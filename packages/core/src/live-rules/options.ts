import { clientCloser } from '../redis-clients/client-closer.js'
import type { RedisConnection } from '../redis-clients/connection.js'
import { connectionOf } from '../redis-clients/connection-of.js'
import type { NodeRedisClientLike } from '../redis-clients/node-redis.js'
import { validatePrefix } from '../rules/keys.js'
import type { RulesOptions, WarningHandler } from '../rules/rules.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, optionKeys } from '../support/option-objects.js'
import { processWarning } from '../support/process-warning.js'
import { MAX_TIMER_MS } from '../support/timer-delay.js'
import type { LiveRulesClient } from './redis-rules.js'

export interface LiveRulesOptions {
  /**
   * An ioredis (or iovalkey) client: `new Redis(…)` (standalone or Sentinel) or `new Cluster(…)`;
   * or a node-redis client, connected: `createClient()`, `createCluster()` (v4 to v6), or
   * `createSentinel()` with `nudges: false`, having no `duplicate()`. Closed by
   * LiveRules only with `closeClient`. It reads and publishes through it; with `nudges`, it also
   * opens one connection of its own, `client.duplicate()`, to hear publishes, closed by `close()`.
   * @example new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
   */
  client: LiveRulesClient | NodeRedisClientLike
  /**
   * Whether `close()` also closes `client`, with `quit()`, once the read under way is done: for a
   * client made for these rules alone. A client the store shares stays open until the last of
   * them closes: give `closeClient: true` to that one (to both, it is closed once).
   * @default false
   * @example new LiveRules({ client, defaults, closeClient: true })
   */
  closeClient?: boolean
  /**
   * The rules in code, as `createLimiter` takes them (or `loadRules(…)` gives them): what every
   * rule runs without an override, and goes back to when its override is dropped. `{}` for a
   * process that only administers the published rules (`tollgate rules …`): it sees those alone,
   * each as a rule without a default, and a limiter following it needs at least one published.
   * @example { api: { windows: [{ limit: 100, period: '1m' }] } }
   */
  defaults: RulesOptions
  /**
   * Prepended to the keys live rules keep (`<prefix>{rules}:…`) and to the channel of their
   * nudges. Processes with the same prefix share one rule set. Must not contain `{` or `}`.
   * @default 'tg:'
   * @example 'checkout:'
   */
  prefix?: string
  /**
   * How often each process reads the epoch (one GET), and the rules changed since when it moved.
   * Nudges make a publish arrive sooner; this bounds how late it arrives when a nudge is lost.
   * `0` stops the timer: rules then change on nudges, `refresh()` and `noteEpoch()` only.
   * @default 1000
   * @example 5_000
   */
  pollIntervalMs?: number
  /**
   * A file the rule set is saved to after each read that changed it, atomically (a file beside
   * it renamed over it), and read at start: a process that starts while Redis is down runs the
   * rules it last saw, not only the defaults. The file must be writable by the process.
   * @default undefined (no snapshot: the defaults until Redis answers)
   * @example '/var/lib/app/tollgate-rules.json'
   */
  snapshotPath?: string
  /**
   * Receives warnings, each with a code: Redis unreachable (`TG_RULES_UNREACHABLE`) and reachable
   * again (`TG_RULES_RECOVERED`), a stored rule rejected (`TG_RULES_REJECTED`), a snapshot that
   * cannot be read or written (`TG_RULES_SNAPSHOT`), nudges not heard (`TG_RULES_NUDGES_LOST`),
   * the rules this process applied no longer in Redis, a publish lost (`TG_RULES_DIVERGED`),
   * and, when no limiter follows these rules, what a published rule warns of.
   * @default process.emitWarning
   */
  onWarning?: WarningHandler
  /**
   * Whether to hear publishes as they happen, on a connection of its own that subscribes to
   * their nudges (Redis Pub/Sub). `false` where Pub/Sub is not available: changes then arrive
   * by polling only, within `pollIntervalMs`. Publishing sends the nudge either way.
   * @default true
   * @example false
   */
  nudges?: boolean
}

export interface LiveRulesConfig {
  readonly connection: RedisConnection
  /** What `close()` calls last: quits the client when `closeClient` gave it to LiveRules. */
  readonly closeClient: (() => Promise<void>) | undefined
  readonly defaults: RulesOptions
  readonly prefix: string
  readonly pollIntervalMs: number
  readonly snapshotPath: string | undefined
  readonly onWarning: WarningHandler
  readonly nudges: boolean
}

const OPTION_KEYS = optionKeys<LiveRulesOptions>({
  client: true,
  closeClient: true,
  defaults: true,
  prefix: true,
  pollIntervalMs: true,
  snapshotPath: true,
  onWarning: true,
  nudges: true,
})

/** Polling faster than this is a unit mistake (seconds meant), not a need: a publish nudges every process at once. */
const MIN_POLL_INTERVAL_MS = 10

export function liveRulesConfigOf(raw: unknown): LiveRulesConfig {
  const options = checkOptionsObject(raw, OPTION_KEYS, 'LiveRules options', { shape: '{ client, defaults }' })
  const {
    client,
    defaults,
    prefix = 'tg:',
    pollIntervalMs = 1_000,
    snapshotPath,
    onWarning = processWarning,
    nudges = true,
  } = options
  const connection = connectionOf(client, 'LiveRules option client')
  // setTimeout holds at most a signed 32-bit delay; past it Node silently uses 1 ms.
  if (
    typeof pollIntervalMs !== 'number' ||
    !Number.isSafeInteger(pollIntervalMs) ||
    (pollIntervalMs !== 0 && (pollIntervalMs < MIN_POLL_INTERVAL_MS || pollIntervalMs > MAX_TIMER_MS))
  ) {
    throw new TollgateConfigError(
      `LiveRules option pollIntervalMs must be 0 (no polling) or an integer from ${MIN_POLL_INTERVAL_MS} to ${MAX_TIMER_MS} milliseconds, got ${describeValue(pollIntervalMs)}`,
    )
  }
  if (snapshotPath !== undefined && (typeof snapshotPath !== 'string' || snapshotPath.length === 0)) {
    throw new TollgateConfigError(
      `LiveRules option snapshotPath must be a file path, got ${describeValue(snapshotPath)}`,
    )
  }
  if (typeof onWarning !== 'function') {
    throw new TollgateConfigError(`LiveRules option onWarning must be a function, got ${describeValue(onWarning)}`)
  }
  if (typeof nudges !== 'boolean') {
    throw new TollgateConfigError(`LiveRules option nudges must be a boolean, got ${describeValue(nudges)}`)
  }
  if (nudges && connection.subscribe === undefined) {
    throw new TollgateConfigError(
      'LiveRules option nudges needs a client with duplicate() to subscribe on (a node-redis Sentinel has none); give nudges: false to poll only',
    )
  }
  return {
    connection,
    closeClient: clientCloser(options.closeClient, connection, 'LiveRules'),
    defaults: defaults as RulesOptions,
    prefix: validatePrefix(prefix),
    pollIntervalMs,
    snapshotPath: snapshotPath as string | undefined,
    onWarning: onWarning as WarningHandler,
    nudges,
  }
}
