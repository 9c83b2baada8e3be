import type {
  Clock,
  FleetStatsReadClient,
  LiveRulesClient,
  RedisClientLike,
  RulesOptions,
  WarningHandler,
} from '@tollgate/core'
import {
  checkOptionsObject,
  describeValue,
  MAX_TIMER_MS,
  type OptionKeys,
  optionKeys,
  TollgateConfigError,
  wholeOption,
} from '@tollgate/core'

/**
 * What the view sends Redis: the fleet-stats readers', LiveRules' and a RedisStore's commands, and
 * `EXISTS` to tell whether a reset found state (an ioredis `Redis` or `Cluster`).
 */
export type AdminClient = FleetStatsReadClient &
  LiveRulesClient &
  RedisClientLike & { exists(key: string): Promise<number> }

export interface AdminOptions {
  /** An ioredis client (`Redis` or `Cluster`) on the fleet's Redis; never closed by the view. */
  client: AdminClient
  /**
   * The prefix the fleet's limiters, `shareFleetStats` and `LiveRules` use.
   * @default 'tg:'
   */
  prefix?: string
  /**
   * The rules in code (what `createLimiter` takes, or `loadRules(…)` gives): the defaults under
   * the live rules published in Redis. A reset needs the rule in force to find its keys; without
   * them, only rules published through `LiveRules` can be reset.
   * @default {}
   * @example { rules: loadRules('limits.yaml') }
   */
  rules?: RulesOptions
  /**
   * Enables resets: `POST reset` with `Authorization: Bearer <token>` forgets an identifier's
   * state in a rule. At least 16 characters. Without it the view is read-only and every reset
   * answers 403.
   * @default undefined (read-only)
   * @example { token: process.env.TOLLGATE_ADMIN_TOKEN }
   */
  token?: string
  /**
   * Shows identifiers as they are. By default they are masked: an IPv4 address to its /24
   * (`ip:203.0.113.*`), an IPv6 network to its /48, anything else to its kind and a short keyed
   * digest (`user:#3f9a1c2e`).
   * @default false
   */
  showIdentifiers?: boolean
  /**
   * The processes' `shareFleetStats` `flushIntervalMs`: a second is shown once it ended this long
   * ago, when every process has written it, and a process that has not written for three of
   * these is no longer listed.
   * @default 1000
   */
  flushIntervalMs?: number
  /**
   * The processes' `shareFleetStats` `topIntervalMs`: the span of each list of refused identifiers.
   * @default 10_000
   */
  topIntervalMs?: number
  /**
   * How often the open pages are sent what the fleet wrote (one read of Redis for all of them):
   * 10 to 2147483647 ms, what a timer holds.
   * @default 1000
   */
  intervalMs?: number
  /**
   * How many event streams (open pages) the view serves at once: each holds a connection and
   * what is waiting to be sent on it. One more is answered 503 with `Retry-After`.
   * @default 100
   */
  maxStreams?: number
  /**
   * How many bytes may wait unsent on one event stream when the next update is due: a page that
   * stopped reading (a suspended laptop, a stalled proxy) is dropped past this, rather than kept
   * in memory update after update. Its browser opens the stream again once it reads.
   * @default 262_144 (256 KiB)
   */
  maxBufferedBytes?: number
  /**
   * How long a read of Redis may take before the pages are told their figures are stale (a
   * `stale` event, and again at each `intervalMs` while the read has not answered): a Redis
   * that hangs sends no error, only silence. 10 to 2147483647 ms.
   * @default 3000
   */
  staleAfterMs?: number
  /**
   * Where the handler is mounted, for frameworks that pass it the whole path (Fastify, Koa).
   * Express's `app.use('/tollgate', …)` strips it already: leave it out there.
   * @default ''
   * @example { basePath: '/tollgate' }
   */
  basePath?: string
  /**
   * Wall-clock time: which seconds are shown (tests move it).
   * @default Date.now
   */
  clock?: Clock
  /** Where the live rules' warnings go (`TG_RULES_UNREACHABLE`, …). @default process.emitWarning */
  onWarning?: WarningHandler
}

export interface AdminServerOptions extends AdminOptions {
  /** The TCP port; `0` takes any free one (`server.port` says which). */
  port: number
  /**
   * The address to listen on. Anything but a loopback address exposes the view to the network:
   * put it behind authentication there.
   * @default '127.0.0.1'
   */
  host?: string
}

export interface AdminConfig {
  client: AdminClient
  prefix: string
  rules: RulesOptions
  token: string | undefined
  showIdentifiers: boolean
  flushIntervalMs: number
  topIntervalMs: number
  intervalMs: number
  maxStreams: number
  maxBufferedBytes: number
  staleAfterMs: number
  basePath: string
  now: () => number
  onWarning: WarningHandler | undefined
}

const OPTION_KEYS = optionKeys<AdminOptions>({
  client: true,
  prefix: true,
  rules: true,
  token: true,
  showIdentifiers: true,
  flushIntervalMs: true,
  topIntervalMs: true,
  intervalMs: true,
  maxStreams: true,
  maxBufferedBytes: true,
  staleAfterMs: true,
  basePath: true,
  clock: true,
  onWarning: true,
})
const SERVER_OPTION_KEYS: OptionKeys<AdminServerOptions> = new Set([...OPTION_KEYS, 'port', 'host'])
const MIN_TOKEN_LENGTH = 16

export function adminConfigOf(options: AdminOptions, where: 'adminHandler' | 'startAdminServer'): AdminConfig {
  checkOptionsObject(options, where === 'startAdminServer' ? SERVER_OPTION_KEYS : OPTION_KEYS, where, {
    shape: '{ client }',
  })
  const { client } = options
  if (
    client === null ||
    typeof client !== 'object' ||
    typeof client.hgetall !== 'function' ||
    typeof client.defineCommand !== 'function'
  ) {
    throw new TollgateConfigError(
      `${where} option client must be an ioredis Redis or Cluster client, got ${describeValue(client)}`,
    )
  }
  const prefix = options.prefix ?? 'tg:'
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new TollgateConfigError(
      `${where} option prefix must be a string without '{' or '}', got ${describeValue(prefix)}`,
    )
  }
  const rules = options.rules ?? {}
  if (rules === null || typeof rules !== 'object' || Array.isArray(rules)) {
    throw new TollgateConfigError(`${where} option rules must be a rules object, got ${describeValue(rules)}`)
  }
  const { token } = options
  if (token !== undefined && (typeof token !== 'string' || token.length < MIN_TOKEN_LENGTH)) {
    // The token itself is never repeated in an error message.
    const got = typeof token === 'string' ? `a string of ${token.length} characters` : describeValue(token)
    throw new TollgateConfigError(
      `${where} option token must be a string of at least ${MIN_TOKEN_LENGTH} characters, got ${got}`,
    )
  }
  const showIdentifiers = options.showIdentifiers ?? false
  if (typeof showIdentifiers !== 'boolean') {
    throw new TollgateConfigError(
      `${where} option showIdentifiers must be a boolean, got ${describeValue(showIdentifiers)}`,
    )
  }
  const basePath = options.basePath ?? ''
  if (typeof basePath !== 'string' || (basePath !== '' && (!basePath.startsWith('/') || basePath.endsWith('/')))) {
    throw new TollgateConfigError(
      `${where} option basePath must be '' or a path that starts with '/' and does not end with one, got ${describeValue(basePath)}`,
    )
  }
  const clock = options.clock ?? Date.now
  if (typeof clock !== 'function') {
    throw new TollgateConfigError(`${where} option clock must be a function, got ${describeValue(clock)}`)
  }
  if (options.onWarning !== undefined && typeof options.onWarning !== 'function') {
    throw new TollgateConfigError(
      `${where} option onWarning must be a function, got ${describeValue(options.onWarning)}`,
    )
  }
  const now = () => {
    const value = clock()
    if (!Number.isFinite(value)) throw new TollgateConfigError(`${where} option clock returned ${describeValue(value)}`)
    return value
  }
  return {
    client,
    prefix,
    rules,
    token,
    showIdentifiers,
    flushIntervalMs: wholeOption(where, 'flushIntervalMs', options.flushIntervalMs ?? 1000, 10, MAX_TIMER_MS),
    topIntervalMs: wholeOption(where, 'topIntervalMs', options.topIntervalMs ?? 10_000, 10),
    // The view's own timer: past MAX_TIMER_MS, Node would tick every millisecond.
    intervalMs: wholeOption(where, 'intervalMs', options.intervalMs ?? 1000, 10, MAX_TIMER_MS),
    maxStreams: wholeOption(where, 'maxStreams', options.maxStreams ?? 100, 1),
    maxBufferedBytes: wholeOption(where, 'maxBufferedBytes', options.maxBufferedBytes ?? 262_144, 0),
    staleAfterMs: wholeOption(where, 'staleAfterMs', options.staleAfterMs ?? 3000, 10, MAX_TIMER_MS),
    basePath,
    now,
    onWarning: options.onWarning,
  }
}

export function serverAddressOf(options: AdminServerOptions): { port: number; host: string } {
  const { port, host = '127.0.0.1' } = options
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new TollgateConfigError(
      `startAdminServer option port must be an integer from 0 to 65535, got ${describeValue(port)}`,
    )
  }
  if (typeof host !== 'string' || host === '') {
    throw new TollgateConfigError(
      `startAdminServer option host must be an address to listen on, got ${describeValue(host)}`,
    )
  }
  return { port, host }
}
