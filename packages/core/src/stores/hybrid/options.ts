import { clientCloser } from '../../redis-clients/client-closer.js'
import type { RedisConnection } from '../../redis-clients/connection.js'
import { connectionOf } from '../../redis-clients/connection-of.js'
import type { RedisClientLike } from '../../redis-clients/ioredis.js'
import type { NodeRedisClientLike } from '../../redis-clients/node-redis.js'
import { validatePrefix } from '../../rules/keys.js'
import type { WarningHandler } from '../../rules/rules.js'
import type { Clock } from '../../support/clock.js'
import { clockOption } from '../../support/clock.js'
import { describeValue, TollgateConfigError } from '../../support/errors.js'
import { checkOptionsObject, optionKeys } from '../../support/option-objects.js'
import { processWarning } from '../../support/process-warning.js'
import { MAX_TIMER_MS } from '../../support/timer-delay.js'

/**
 * What a HybridStore decides with once Redis has not answered a sync for `outage.afterMs`, in the
 * words of the limiter's `onStoreError`, with the reasons it gives:
 * - `'local-share'`: each process admits ⌈limit ÷ live processes⌉ per window on its own, the
 *   processes counted in Redis as those that synced within the last three intervals (reason
 *   `local-fallback`);
 * - `'local'`: each process admits the whole limit on its own (reason `local-fallback`);
 *   `'local-full'` is its former name, still taken (deprecated);
 * - `'allow'` / `'deny'`: every request passes / is refused (reasons `store-error-allowed`,
 *   `store-error-denied`).
 */
export type OutagePolicy = 'local-share' | 'local' | 'allow' | 'deny' | 'local-full'

/** The policies' names as they are told (`'local-full'`, deprecated, is taken as `'local'`). */
export const OUTAGE_POLICIES: readonly OutagePolicy[] = ['local-share', 'local', 'allow', 'deny']

export interface HybridOutageOptions {
  /** @default 'local-share' */
  policy?: OutagePolicy
  /**
   * How long without a good sync, the last one having failed, before decisions follow `policy`;
   * `Infinity`: never, decisions go on from the last totals however old.
   * @default 3 × syncIntervalMs
   */
  afterMs?: number
}

/** How a HybridStore's counts relate to the limits: see `consistency`. */
export type HybridConsistency = 'approximate' | 'strict'

export const CONSISTENCIES: readonly HybridConsistency[] = ['approximate', 'strict']

export interface HybridLeaseOptions {
  /**
   * A slice holds this many times the units this process admitted on the key in its last sync
   * interval: more means fewer decisions that wait on Redis, and more units a process holds
   * that others cannot use until it returns them.
   * @default 2
   */
  headroom?: number
  /**
   * The fewest units a slice asks for, however idle the key.
   * @default 1
   */
  min?: number
}

export interface HybridStoreOptions {
  /**
   * An ioredis (or iovalkey) client: `new Redis(…)` (standalone or Sentinel) or `new Cluster(…)`;
   * or a node-redis client, connected: `createClient()`, `createCluster()` or `createSentinel()`
   * (v4 to v6). Closed by the store only with `closeClient`.
   */
  client: RedisClientLike | NodeRedisClientLike
  /**
   * Whether `close()` (and so `limiter.close()`) also closes `client`, with `quit()`, once its
   * last sync is done: for a client made for this store alone, so that a script ends once its
   * limiter is closed. Leave it `false` for a client other code still uses.
   * @default false
   * @example new HybridStore({ client: new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'), closeClient: true })
   */
  closeClient?: boolean
  /**
   * Prepended to every key: the keys are a `RedisStore`'s with the same prefix, so that the two
   * share counters. Must not contain `{` or `}`.
   * @default 'tg:'
   */
  prefix?: string
  /**
   * How often this process pushes what it admitted and pulls the fleet's totals. The
   * over-admission bound grows with it (README, "Hybrid store").
   * @default 1000
   */
  syncIntervalMs?: number
  /**
   * Whether a timer syncs every `syncIntervalMs` (±10%, unref'd). `false`: nothing syncs until
   * `syncNow()`.
   * @default true
   */
  autoSync?: boolean
  /**
   * The only time source when given, for decisions and for the sync script alike (tests move it).
   * By default: this process's monotonic time, offset to Redis `TIME` as measured at each sync.
   * @example () => Date.now()
   */
  clock?: Clock
  /** What decides while Redis does not answer. @default { policy: 'local-share', afterMs: 3 × syncIntervalMs } */
  outage?: HybridOutageOptions
  /**
   * The most keys tracked in the process. Past it, a key not used since the eviction hand last
   * passed goes, synced keys first in practice (a key with units not yet pushed is marked used
   * by every decision that charges it).
   * @default 1_000_000
   */
  maxTrackedKeys?: number
  /**
   * Whether, between syncs, the units other processes admitted are assumed to go on at the rate
   * seen between this process's last two syncs of the key, as YARL does. `false`: a window's use
   * is the last synced total plus what this process admitted since.
   * @default true
   */
  extrapolate?: boolean
  /**
   * How long a sync waits for Redis to answer its next call before it reports a failure: a sync of
   * many keys, which takes longer than this in calls that keep answering, is not one. Its units
   * are pushed again at the next sync if Redis never took them.
   * @default syncIntervalMs
   */
  syncTimeoutMs?: number
  /**
   * Where the store's warnings go (`TG_HYBRID_DEGRADED` when decisions start following the outage
   * policy, `TG_HYBRID_RECOVERED` when a sync succeeds again, `TG_HYBRID_SYNC_SLOW` when a sync
   * takes longer than `syncIntervalMs`).
   * @default process.emitWarning
   */
  onWarning?: WarningHandler
  /**
   * `'approximate'`: every decision in the process, on counters synced about once a second; a
   * window may admit above its limit by the stated bound (docs/hybrid.md). `'strict'`: the
   * process decides on slices of the limits it reserved in Redis (leases), so that no window ever
   * admits above its limit, whatever the number of processes; a decision whose slices run short
   * waits for one Redis round trip that decides it as a `RedisStore` would and refills them.
   * Strict mode runs the fixed and sliding windows.
   * @default 'approximate'
   * @example new HybridStore({ client, consistency: 'strict', lease: { headroom: 2, min: 1 } })
   */
  consistency?: HybridConsistency
  /**
   * Strict mode's slices: `max(min, headroom × the units this process admitted on the key in its
   * last sync interval)`.
   * @default { headroom: 2, min: 1 }
   */
  lease?: HybridLeaseOptions
}

const OPTION_KEYS = optionKeys<HybridStoreOptions>({
  client: true,
  closeClient: true,
  prefix: true,
  syncIntervalMs: true,
  autoSync: true,
  clock: true,
  outage: true,
  maxTrackedKeys: true,
  extrapolate: true,
  syncTimeoutMs: true,
  onWarning: true,
  consistency: true,
  lease: true,
})
const OUTAGE_KEYS = optionKeys<HybridOutageOptions>({ policy: true, afterMs: true })
const LEASE_KEYS = optionKeys<HybridLeaseOptions>({ headroom: true, min: true })

export interface HybridConfig {
  readonly connection: RedisConnection
  /** What `close()` calls last: quits the client when `closeClient` gave it to the store. */
  readonly closeClient: (() => Promise<void>) | undefined
  readonly prefix: string
  readonly syncIntervalMs: number
  readonly autoSync: boolean
  readonly clock: Clock | undefined
  readonly outagePolicy: Exclude<OutagePolicy, 'local-full'>
  readonly outageAfterMs: number
  readonly maxTrackedKeys: number
  readonly extrapolate: boolean
  readonly syncTimeoutMs: number
  readonly warn: WarningHandler
  readonly strict: boolean
  readonly leaseHeadroom: number
  readonly leaseMin: number
}

export function hybridConfigOf(options: HybridStoreOptions): HybridConfig {
  const raw = checkOptionsObject(options, OPTION_KEYS, 'HybridStore options', { shape: '{ client }' })
  const connection = connectionOf(raw.client, 'HybridStore option client')
  const closeClient = clientCloser(raw.closeClient, connection, 'HybridStore')
  const prefix = validatePrefix(raw.prefix ?? 'tg:', 'HybridStore')
  const syncIntervalMs = wholeMs(raw.syncIntervalMs ?? 1000, 'syncIntervalMs', 10)
  const autoSync = raw.autoSync ?? true
  if (typeof autoSync !== 'boolean') {
    throw new TollgateConfigError(`HybridStore option autoSync must be true or false, got ${describeValue(autoSync)}`)
  }
  const { clock } = raw
  if (clock !== undefined) clockOption(clock, 'HybridStore')
  const outage = checkOptionsObject(raw.outage ?? {}, OUTAGE_KEYS, 'HybridStore option outage', {
    shape: '{ policy, afterMs }',
  })
  const given = outage.policy ?? 'local-share'
  const outagePolicy = given === 'local-full' ? 'local' : given
  if (!OUTAGE_POLICIES.includes(outagePolicy as OutagePolicy)) {
    throw new TollgateConfigError(
      `HybridStore option outage.policy must be ${OUTAGE_POLICIES.map((p) => `'${p}'`).join(', ')}, got ${describeValue(outagePolicy)}`,
    )
  }
  const outageAfterMs = outage.afterMs ?? 3 * syncIntervalMs
  if (
    outageAfterMs !== Number.POSITIVE_INFINITY &&
    (typeof outageAfterMs !== 'number' || !Number.isSafeInteger(outageAfterMs) || outageAfterMs < 0)
  ) {
    throw new TollgateConfigError(
      `HybridStore option outage.afterMs must be whole milliseconds ≥ 0, or Infinity, got ${describeValue(outageAfterMs)}`,
    )
  }
  const maxTrackedKeys = raw.maxTrackedKeys ?? 1_000_000
  if (typeof maxTrackedKeys !== 'number' || !Number.isSafeInteger(maxTrackedKeys) || maxTrackedKeys < 1) {
    throw new TollgateConfigError(
      `HybridStore option maxTrackedKeys must be a positive integer, got ${describeValue(maxTrackedKeys)}`,
    )
  }
  const extrapolate = raw.extrapolate ?? true
  if (typeof extrapolate !== 'boolean') {
    throw new TollgateConfigError(
      `HybridStore option extrapolate must be true or false, got ${describeValue(extrapolate)}`,
    )
  }
  const syncTimeoutMs = wholeMs(raw.syncTimeoutMs ?? syncIntervalMs, 'syncTimeoutMs', 1)
  const warn = raw.onWarning ?? processWarning
  if (typeof warn !== 'function') {
    throw new TollgateConfigError(`HybridStore option onWarning must be a function, got ${describeValue(warn)}`)
  }
  const consistency = raw.consistency ?? 'approximate'
  if (!CONSISTENCIES.includes(consistency as HybridConsistency)) {
    throw new TollgateConfigError(
      `HybridStore option consistency must be ${CONSISTENCIES.map((c) => `'${c}'`).join(' or ')}, got ${describeValue(consistency)}`,
    )
  }
  const lease = checkOptionsObject(raw.lease ?? {}, LEASE_KEYS, 'HybridStore option lease', {
    shape: '{ headroom, min }',
  })
  const leaseHeadroom = lease.headroom ?? 2
  if (typeof leaseHeadroom !== 'number' || !Number.isFinite(leaseHeadroom) || leaseHeadroom < 0) {
    throw new TollgateConfigError(
      `HybridStore option lease.headroom must be a finite number ≥ 0, got ${describeValue(leaseHeadroom)}`,
    )
  }
  const leaseMin = lease.min ?? 1
  if (typeof leaseMin !== 'number' || !Number.isSafeInteger(leaseMin) || leaseMin < 1) {
    throw new TollgateConfigError(
      `HybridStore option lease.min must be a positive integer, got ${describeValue(leaseMin)}`,
    )
  }
  return {
    connection,
    closeClient,
    prefix,
    syncIntervalMs,
    autoSync,
    clock: clock as Clock | undefined,
    outagePolicy: outagePolicy as Exclude<OutagePolicy, 'local-full'>,
    outageAfterMs: outageAfterMs as number,
    maxTrackedKeys,
    extrapolate,
    syncTimeoutMs,
    warn: warn as WarningHandler,
    strict: consistency === 'strict',
    leaseHeadroom,
    leaseMin,
  }
}

function wholeMs(value: unknown, name: string, least: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < least || value > MAX_TIMER_MS) {
    throw new TollgateConfigError(
      `HybridStore option ${name} must be whole milliseconds from ${least} to ${MAX_TIMER_MS}, got ${describeValue(value)}`,
    )
  }
  return value
}
