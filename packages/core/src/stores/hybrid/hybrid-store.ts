import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import calculateSlot from 'cluster-key-slot'
import { KeyBuilder } from '../../rules/keys.js'
import type { AlgorithmName, Window } from '../../rules/rules.js'
import { leaseScript, syncScript } from '../../scripts/generated.js'
import { timeFrom } from '../../support/clock.js'
import { isStoreDown, TollgateError } from '../../support/errors.js'
import { ClientErrors, type ErrorEvents } from '../shared/client-errors.js'
import { evaluateLocally } from '../shared/evaluate-locally.js'
import { operationKeyBeside, resendAsItWas } from '../shared/operations.js'
import { type CounterAlgorithm, decodeCounterState, toModelState } from '../shared/redis-state.js'
import { ReplyWatches } from '../shared/reply-watch.js'
import { keysReset } from '../shared/reset-once.js'
import type { Store, StoreReceiver, StoreRequest, StoreResult, StoreTarget } from '../store.js'
import { pendingUnits } from './bucket-fold.js'
import { ServerAlignedClock } from './clock.js'
import { hybridInstancesKey } from './instances.js'
import { KeyTable, RowList, type Shape } from './key-table.js'
import { type Lease, LeaseBook } from './lease-book.js'
import { type LeaseChunkOutcome, LeaseExchange } from './leases.js'
import { NodeHealth } from './node-health.js'
import { type HybridConfig, type HybridStoreOptions, hybridConfigOf } from './options.js'
import { OutageTable } from './outage.js'
import { PushedAlone } from './pushed-alone.js'
import { record, usedOf, withUnits } from './segments.js'
import {
  type ChunkAnswer,
  chunkArguments,
  chunksOf,
  inTurnByNode,
  pushEntries,
  rangesOf,
  readChunkReply,
  type SyncCommand,
  SyncEntries,
  startInTurn,
} from './sync-wire.js'

/** What `syncNow()` resolves to, and each `sync` event carries. */
export interface SyncReport {
  /** Keys pushed or pulled. */
  keys: number
  /**
   * Units this process pushed above a window's limit in Redis's totals, applied in the order
   * Redis ran the syncs: for fixed windows, the sum over every process equals admitted − limit.
   */
  overAdmitted: number
  /** Units pushed, refunds subtracted (approximate mode). */
  pushedUnits: number
  /** Strict mode: decisions that waited on Redis since the last sync (0 in approximate mode). */
  leaseRoundTrips: number
  /** Strict mode: units this process holds reserved in Redis after this sync (0 in approximate mode). */
  reservedUnits: number
  durationMs: number
  /**
   * Since the sync before this one started (the store's clock, ms): the real period, which a sync
   * longer than `syncIntervalMs` lengthens, and with it the over-admission bound
   * (docs/hybrid.md). Undefined for the first sync.
   * @example 1043
   */
  syncPeriodMs?: number
  /** Live processes Redis counted at this sync; undefined when it failed. */
  instances?: number
  /** Why the sync failed (code `TG_STORE`); its units are pushed again at the next sync. */
  error?: TollgateError
}

export interface HybridStats {
  /**
   * Keys the process holds state for: those it decides and syncs, strict mode's leases, and the
   * outage policy's own counts while no sync reaches Redis; `maxTrackedKeys` bounds each.
   */
  trackedKeys: number
  /** Keys with units Redis has not taken yet. */
  dirtyKeys: number
  /** When the last sync that reached Redis ended (the store's clock, ms); 0 before the first. */
  lastSyncAtMs: number
  /** Since the last good sync (or since the store started, before the first). */
  stalenessMs: number
  /** Live processes at the last good sync (1 before it). */
  instances: number
  /**
   * `'degraded'` once the last sync failed and none has reached Redis for `outage.afterMs`:
   * decisions follow the outage policy.
   */
  mode: 'synced' | 'degraded'
  /**
   * Keys dropped by `maxTrackedKeys` whose units never reached Redis: only while syncs fail, when
   * every key the eviction hand looked at had a push under way several syncs in a row, or when
   * Redis refused the push of a forgotten key's units with an error.
   */
  evictedUnsynced: number
  /** Strict mode: decisions that waited on Redis since the store started (0 in approximate mode). */
  leaseRoundTrips: number
  /** Strict mode: units this process holds reserved in Redis now (0 in approximate mode). */
  reservedUnits: number
  /**
   * The real sync period: between the starts of the last two syncs (ms, the store's clock), 0
   * before the second. The over-admission bound docs/hybrid.md states runs on this T, not on
   * `syncIntervalMs`: syncs that take longer than the interval lengthen it.
   */
  syncPeriodMs: number
  /**
   * Every sync's `overAdmitted` since the store was made, by rule: units this process pushed
   * above a window's limit. Rules that never over-admitted are absent. A rule is named as its
   * keys are, by its `stateName`, `name@<shape>` (the metrics packages and fleet stats label it
   * with its name).
   * @example new Map([['api@M86G', 12]])
   */
  overAdmittedByRule: ReadonlyMap<string, number>
  /** Strict mode: `leaseRoundTrips` by the rule of the decision's first key (its own), named as `overAdmittedByRule` names it. */
  leaseRoundTripsByRule: ReadonlyMap<string, number>
}

export interface HybridStoreEvents {
  sync: [report: SyncReport]
}

const COUNTER_ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra']
/**
 * A bucket's tokens reserved at one time and spent later would let it pass its capacity in a
 * burst, and a sliding log's entries are times: strict mode runs the two windowed counters.
 */
const STRICT_ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-window']
const COMMAND = `tollgateSync${syncScript.sha1.slice(0, 12)}`
const LEASE_COMMAND = `tollgateLease${leaseScript.sha1.slice(0, 12)}`
/** Expired keys the sync looks at per run to drop them, beside pushing: the sweep goes round in slices. */
const SWEEP_PER_SYNC = 10_000
/**
 * Syncs a decision on a key the table has no room for waits through, each pushing what the rows
 * hold, before a key with units not yet pushed is forgotten anyway (`evictedUnsynced`).
 */
const ROOM_ATTEMPTS = 5

/**
 * Decides in the process, on counters it syncs with Redis about once a second (the YARL design):
 * a decision on a key it holds never waits on Redis and costs what an in-process decision costs
 * (a key new to a table holding `maxTrackedKeys` keys is read first), and Redis sees one
 * script call per chunk of keys per interval, whatever the request rate. The keys and their
 * layout are a RedisStore's with the same prefix, so that the two share counters.
 *
 * With N processes syncing every T and a load R spread evenly over them, a window admits about
 * R·T·(N−1)/N above its limit under steady overload, never more than R·(2T + RTT)·(N−1)/N; one
 * process is exact. Each sync reports the units it pushed above a limit (`overAdmitted`).
 * The sliding log cannot be summed: `createLimiter` refuses it on this store.
 *
 * With `consistency: 'strict'`, the process decides on slices of the limits it reserved in Redis
 * (leases) and never admits above a limit; a decision its slices do not cover waits for one
 * round trip (`lease-book.ts` says why that is exact).
 */
export class HybridStore extends EventEmitter<HybridStoreEvents> implements Store {
  readonly supportedAlgorithms: readonly AlgorithmName[]
  /**
   * Undefined for a decision that needs Redis first: in strict mode a consume its slices do not
   * cover; in approximate mode one on a key new to a table holding `maxTrackedKeys` keys.
   */
  readonly evaluateSync: (request: StoreRequest) => StoreResult | undefined
  private readonly config: HybridConfig
  /** Strict mode's slices, and its exchanges with Redis. */
  private readonly book: LeaseBook | undefined
  private readonly exchange: LeaseExchange | undefined
  private roundTripsReported = 0
  /** When Redis last answered a sync or a round trip: the outage is measured from it. */
  private lastContactAt = 0
  /** Keys read on each sync, and who hears their values. */
  private readonly riders = new Map<string, Set<(value: string | null) => void>>()
  private readonly keys: KeyBuilder
  private readonly cluster: boolean
  private readonly runSync: SyncCommand
  private readonly aligned: ServerAlignedClock | undefined
  private readonly now: () => number
  private readonly rows: KeyTable
  /** Rows of the keys the next sync pushes or pulls. */
  private readonly listed: RowList
  /** Each decision's rows, in target order, reused by every decision rather than allocated for each. */
  private tracked: number[] = []
  private readonly instance = `${process.pid}-${randomBytes(6).toString('hex')}`
  private readonly heartbeatKey: string
  private readonly errors: ClientErrors | undefined
  /** The connections' silence, which bounds a decision waiting on Redis (a read, a lease, a sync). */
  private readonly watches: ReplyWatches
  /** Units pushed outside a sync: under a key's earlier limits, or of a key forgotten to make room. */
  private readonly alone: PushedAlone
  /** The sync decisions waiting for a free row wait on: one at a time, however many wait. */
  private roomSync: Promise<SyncReport> | undefined
  private readonly resetKeys: ReturnType<typeof keysReset>
  private readonly startedAt: number
  private lastGoodSyncAt = 0
  /** Whether each node's last exchange with this store (a sync, a read, a lease round trip) reached it, and when one last did. */
  private readonly health: NodeHealth
  private instances = 1
  private degradedNoticed = false
  private outage: OutageTable | undefined
  private evictedUnsynced = 0
  private readonly overAdmittedByRule = new Map<string, number>()
  private syncing: Promise<SyncReport> | undefined
  /** When the last sync started, and the time between the last two starts (the store's clock). */
  private lastSyncStartAt = 0
  private syncPeriodMs = 0
  /** Whether the last sync took longer than the interval, warned once until one does not. */
  private slowNoticed = false
  /** Pushes whose calls failed, their units still `sending`: sent again as they were at the next sync. */
  private readonly doubtful: DoubtfulPush[] = []
  private timer: NodeJS.Timeout | undefined
  private closed = false

  constructor(options: HybridStoreOptions) {
    super()
    this.config = hybridConfigOf(options)
    const { client, prefix, clock } = this.config
    this.keys = new KeyBuilder(prefix)
    this.rows = new KeyTable(this.config.maxTrackedKeys, this.keys)
    this.listed = new RowList(this.config.maxTrackedKeys)
    this.heartbeatKey = hybridInstancesKey(prefix)
    this.cluster = (client as { isCluster?: unknown }).isCluster === true
    const commands = client as unknown as Record<string, SyncCommand | undefined>
    if (typeof commands[COMMAND] !== 'function') client.defineCommand(COMMAND, { lua: syncScript.lua })
    this.runSync = (commands[COMMAND] as SyncCommand).bind(client)
    this.watches = new ReplyWatches(client, this.cluster)
    this.alone = new PushedAlone(this.config.maxTrackedKeys, {
      send: (keyCount, keysAndArgs) => this.sent(keyCount, keysAndArgs),
      operationKey: (key) => operationKeyBeside(prefix, key),
      putBack: (row, generation, units) => {
        if (!this.rows.holds(row, generation)) {
          this.evictedUnsynced++
          return
        }
        this.rows.putBack(row, units)
        if (this.rows.list(row)) this.listed.push(row)
      },
      overAdmitted: (rule, units) => this.overAdmitted(rule, units),
    })
    this.supportedAlgorithms = this.config.strict ? STRICT_ALGORITHMS : COUNTER_ALGORITHMS
    this.evaluateSync = this.config.strict ? (request) => this.decideStrict(request) : (request) => this.decide(request)
    if (this.config.strict) {
      if (typeof commands[LEASE_COMMAND] !== 'function') client.defineCommand(LEASE_COMMAND, { lua: leaseScript.lua })
      const { leaseHeadroom: headroom, leaseMin: min, syncIntervalMs } = this.config
      this.book = new LeaseBook(this.keys, this.config.maxTrackedKeys, { headroom, min, syncIntervalMs })
      this.exchange = new LeaseExchange({
        book: this.book,
        run: (commands[LEASE_COMMAND] as SyncCommand).bind(client),
        cluster: this.cluster,
        watches: this.watches,
        operationKey: (key) => operationKeyBeside(prefix, key),
        timeOf: (now) => (this.config.clock ? String(now) : '-'),
        instances: () => this.instances,
        instance: this.instance,
        answered: (serverMs, sentAt, key) => {
          this.errors?.answered()
          this.health.answered(this.health.nodeOf(key), this.safeNow())
          this.aligned?.measured(serverMs, sentAt, performance.now())
        },
      })
    }
    if (clock) {
      this.now = () => timeFrom(clock, 'HybridStore')
    } else {
      this.aligned = new ServerAlignedClock()
      this.now = this.aligned.now
    }
    this.errors =
      typeof client.on === 'function' && typeof client.off === 'function'
        ? ClientErrors.of(client as ErrorEvents)
        : undefined
    this.resetKeys = keysReset(client, prefix, this.cluster)
    this.startedAt = this.now()
    this.health = new NodeHealth(client, this.cluster, this.startedAt)
    if (this.config.autoSync) this.schedule()
  }

  /** The Redis key that holds a target's state: a RedisStore's with the same prefix. */
  keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }

  evaluate(request: StoreRequest): Promise<StoreResult> {
    try {
      const result = this.evaluateSync(request)
      if (result !== undefined) return Promise.resolve(result)
      return this.config.strict ? this.roundTrip(request) : this.readFirst(request)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * A decision `evaluateSync` left to Redis: strict mode's round trip, or approximate mode's read
   * of keys the table had no room for.
   */
  evaluateInto(request: StoreRequest, receiver: StoreReceiver): void {
    const asked = this.config.strict ? this.roundTrip(request, receiver) : this.readFirst(request, receiver)
    asked.then(
      (result) => receiver.answer(result),
      (error: unknown) => receiver.fail(error),
    )
  }

  /**
   * Approximate mode's decision: in the process, on the last synced totals; undefined when a key
   * is new to a full table, which `readFirst` decides. `forgetAny`: a new key takes the row of
   * one with units not yet pushed if it must.
   */
  private decide(request: StoreRequest, forgetAny = false): StoreResult | undefined {
    const now = this.now()
    const { operation, targets, cost } = request
    if (!forgetAny && this.lacksRoom(targets) && !this.failingFor(targets)) return undefined
    const degraded = this.degradedFor(targets, now)
    if (degraded) this.noticeDegraded(now)
    const { rows } = this
    const count = targets.length
    let { tracked } = this
    if (tracked.length < count) {
      tracked = new Array(count)
      this.tracked = tracked
    }
    for (let t = 0; t < count; t++) tracked[t] = this.track(targets[t] as StoreTarget, now)
    let result: StoreResult
    if (degraded && operation !== 'refund') {
      const keys: string[] = new Array(count)
      for (let t = 0; t < count; t++) keys[t] = rows.key(tracked[t] as number)
      result = this.outageResult(keys, request, now)
      if (result.outage?.policy === 'local' && operation === 'consume' && result.allowed && cost > 0) {
        for (let t = 0; t < count; t++) {
          const row = tracked[t] as number
          const { model, windows } = rows.shape(row)
          const charged = model.charge(rows.stateOf(row, now), windows, now, cost)
          rows.setState(row, charged, model.expiresAt(charged, windows))
        }
      }
    } else {
      result = evaluateLocally(rows.table, tracked, request, now)
    }
    const units = operation === 'refund' ? -cost : operation === 'consume' && result.allowed ? cost : 0
    if (units !== 0) {
      for (let t = 0; t < count; t++) {
        const row = tracked[t] as number
        record(rows, row, rows.shape(row), now, units)
        rows.markUsed(row)
        if (rows.list(row)) this.listed.push(row)
      }
    }
    return result
  }

  /**
   * Strict mode's decision in the process: on its slices, or refused while Redis had nothing left
   * for it; undefined when it needs a round trip. While no sync reaches Redis, what the slices do
   * not cover follows the outage policy.
   */
  private decideStrict(request: StoreRequest): StoreResult | undefined {
    const now = this.now()
    const book = this.book as LeaseBook
    const leases = request.targets.map((target) => book.leaseOf(target))
    const result = book.decide(request, leases, now, this.marginMs())
    if (result !== undefined) return result
    if (!this.degradedFor(request.targets, now)) return undefined
    this.noticeDegraded(now)
    return this.outageResult(
      leases.map((lease) => lease.key),
      request,
      now,
    )
  }

  /** Whether a target is new to a table with no free row for it (one forgotten may come back). */
  private lacksRoom(targets: readonly StoreTarget[]): boolean {
    const { rows } = this
    if (rows.size + targets.length <= this.config.maxTrackedKeys) return false
    let fresh = 0
    for (const target of targets) if (rows.find(target.rule, target.identifier) < 0) fresh++
    return fresh > 0 && rows.size + fresh > this.config.maxTrackedKeys
  }

  /**
   * Approximate mode's decision on keys new to a full table. Such a key may be one the process
   * forgot to make room: decided from empty, it would be admitted its limit again at every
   * return, however often the process had synced it. So its totals are read from Redis first (one
   * round trip, the sync script pushing nothing), and it takes the row of a key with nothing to
   * push, or else of one whose units then go to Redis in a push of their own; when every row
   * looked at has a push under way, it waits for that sync.
   */
  private async readFirst(request: StoreRequest, asker?: StoreReceiver): Promise<StoreResult> {
    try {
      for (let attempt = 0; attempt < ROOM_ATTEMPTS && !this.failingFor(request.targets) && !this.closed; attempt++) {
        const fresh = request.targets.filter((target) => this.rows.find(target.rule, target.identifier) < 0)
        if (fresh.length > 0) {
          const totals = await this.readTotals(fresh, asker)
          if (!this.adopt(request.targets, fresh, totals)) {
            if ((await this.syncForRoom(fresh, asker)).error) break
            continue
          }
        }
        const result = this.decide(request)
        if (result !== undefined) return result
      }
    } catch {
      // Redis did not answer the read: decided as every decision is while syncs fail, in the
      // process and, past `outage.afterMs`, by the outage policy.
    }
    return this.decide(request, true) as StoreResult
  }

  /** The fleet's totals of these keys, read by the sync script: a chunk per Cluster slot. */
  private async readTotals(
    targets: readonly StoreTarget[],
    asker: StoreReceiver | undefined,
  ): Promise<Array<{ after: string; syncedAt: number }>> {
    const names = targets.map((target) => this.keyOf(target))
    const time = this.config.clock ? String(this.now()) : '-'
    const totals: Array<{ after: string; syncedAt: number }> = new Array(targets.length)
    try {
      await Promise.all(
        chunksOf(names, this.cluster).map(async (indices) => {
          const keys = indices.map((at) => names[at] as string)
          const entries = new SyncEntries()
          for (const at of indices) {
            const target = targets[at] as StoreTarget
            entries.add(target.algorithm, target.windows, undefined)
          }
          const { keyCount, keysAndArgs } = chunkArguments(entries.entries, keys, time, undefined, undefined)
          const sentAt = performance.now()
          const answer = readChunkReply(await this.sent(keyCount, keysAndArgs, asker), keys)
          this.aligned?.measured(answer.serverMs, sentAt, performance.now())
          const syncedAt = time === '-' ? answer.serverMs : Number(time)
          indices.forEach((at, i) => {
            const value = answer.values[i]
            if (value instanceof TollgateError) throw value
            totals[at] = { after: value as string, syncedAt }
          })
        }),
      )
    } catch (error) {
      if (isStoreDown(error)) this.heardFrom(targets, undefined)
      if (error instanceof TollgateError && error.code === 'TG_STORE') throw error
      throw this.failure(
        `reading a key's totals failed: ${error instanceof Error ? error.message : String(error)}`,
        error,
      )
    }
    this.lastContactAt = this.safeNow()
    this.heardFrom(targets, this.lastContactAt)
    return totals
  }

  /** Runs the sync script, its connection's watch told, and `asker` (a decision waiting on it). */
  private async sent(keyCount: number, keysAndArgs: string[], asker?: StoreReceiver): Promise<unknown> {
    const watch = this.watches.of(this.cluster ? calculateSlot(keysAndArgs[0] as string) : 0)
    const reply = this.runSync(keyCount, ...keysAndArgs)
    watch.sent()
    asker?.sent?.(watch)
    const node = this.health.nodeOf(keysAndArgs[0] as string)
    try {
      const answered = await reply
      this.errors?.answered()
      this.health.answered(node, this.safeNow())
      return answered
    } catch (error) {
      if (isStoreDown(error)) this.health.failed(node, keysAndArgs[0] as string)
      throw error
    } finally {
      watch.heard()
    }
  }

  /**
   * Gives each of `fresh` a row holding the totals Redis told, making room by forgetting keys
   * with nothing to push; false when the rows looked at all held units not yet pushed.
   */
  private adopt(
    targets: readonly StoreTarget[],
    fresh: readonly StoreTarget[],
    totals: ReadonlyArray<{ after: string; syncedAt: number }>,
  ): boolean {
    const { rows } = this
    let needed = 0
    for (const target of targets) {
      const row = rows.find(target.rule, target.identifier)
      // The decision's other keys are kept: the hand passes a used key over.
      if (row >= 0) rows.markUsed(row)
      else needed++
    }
    while (rows.size + needed > this.config.maxTrackedKeys) {
      if (!rows.evictSynced() && !rows.evictPushing(this.pushForgotten)) return false
    }
    const now = this.safeNow()
    fresh.forEach((target, i) => {
      // Another decision's read may have adopted it meanwhile, with totals as recent.
      if (rows.find(target.rule, target.identifier) >= 0) return
      const { after, syncedAt } = totals[i] as { after: string; syncedAt: number }
      const row = rows.add(
        target.identifier,
        rows.shapeOf(target.rule, target.algorithm as CounterAlgorithm, target.windows),
      )
      rows.markUsed(row)
      this.applySynced(row, after, syncedAt, Math.max(syncedAt, now))
    })
    return true
  }

  /** A sync for decisions waiting on a free row: joined, not queued again, by those that come while it runs. */
  private syncForRoom(fresh: readonly StoreTarget[], asker: StoreReceiver | undefined): Promise<SyncReport> {
    let sync = this.roomSync
    if (sync === undefined) {
      const started = this.syncNow()
      sync = started
      this.roomSync = started
      void started.finally(() => {
        if (this.roomSync === started) this.roomSync = undefined
      })
    }
    // Bounded by the connection's silence while the sync's calls are out, not by the wait.
    const first = fresh[0]
    if (first !== undefined) asker?.sent?.(this.watches.of(this.cluster ? calculateSlot(this.keyOf(first)) : 0))
    return sync
  }

  /** A decision its slices did not cover, made in Redis. */
  private async roundTrip(request: StoreRequest, asker?: StoreReceiver): Promise<StoreResult> {
    const now = this.now()
    const book = this.book as LeaseBook
    const leases: Lease[] = request.targets.map((target) => book.leaseOf(target))
    try {
      const result = await (this.exchange as LeaseExchange).decide(request, leases, now, asker)
      this.lastContactAt = this.safeNow()
      this.heardFrom(request.targets, this.lastContactAt)
      return result
    } catch (error) {
      if (isStoreDown(error)) this.heardFrom(request.targets, undefined)
      if (error instanceof TollgateError && error.code === 'TG_STORE') throw error
      throw this.failure(
        `the lease round trip failed: ${error instanceof Error ? error.message : String(error)}`,
        error,
      )
    }
  }

  /** The outage policy's answer for a decision made without Redis. */
  private outageResult(keys: readonly string[], request: StoreRequest, now: number): StoreResult {
    const { outagePolicy } = this.config
    const error = this.outageError(now)
    if (outagePolicy === 'allow' || outagePolicy === 'deny') {
      return { allowed: outagePolicy === 'allow', nowMs: now, windows: [], outage: { policy: outagePolicy, error } }
    }
    this.outage ??= new OutageTable(outagePolicy === 'local-share' ? this.instances : 1, this.config.maxTrackedKeys)
    const result = this.outage.evaluate(keys, request, now)
    result.outage = { policy: 'local', error }
    return result
  }

  /** How early a slice stops: the default clock may differ from Redis's by this much. */
  private marginMs(): number {
    return this.aligned ? this.aligned.uncertaintyMs() : 0
  }

  /**
   * Forgets these targets here and in Redis; units not yet pushed for them are dropped too, and
   * in strict mode the slices reserved on them, which Redis forgets.
   */
  async reset(targets: readonly StoreTarget[]): Promise<void> {
    if (targets.length === 0) return
    const keys: string[] = []
    for (const target of targets) {
      const key = this.keyOf(target)
      this.book?.forget(target)
      const row = this.rows.find(target.rule, target.identifier)
      if (row >= 0) this.rows.remove(row)
      keys.push(key, `${key}:prev`)
    }
    await this.resetKeys(keys, targets, this.config.clock ? String(this.now()) : '-')
    this.errors?.answered()
  }

  recentError(): Error | undefined {
    return this.errors?.recent
  }

  readOnEachSync(key: string, onValue: (value: string | null) => void): () => void {
    let hearing = this.riders.get(key)
    if (hearing === undefined) {
      hearing = new Set()
      this.riders.set(key, hearing)
    }
    hearing.add(onValue)
    return () => {
      hearing.delete(onValue)
      if (hearing.size === 0) this.riders.delete(key)
    }
  }

  /**
   * Pushes every unit admitted here since the last sync and pulls the fleet's totals of every key
   * decided on since; resolves when done. One sync at a time: a call while one runs waits for it,
   * then syncs. A store failure never rejects: the report says it (`error`).
   */
  syncNow(): Promise<SyncReport> {
    const previous = this.syncing ?? Promise.resolve(undefined)
    const next = previous.then(() => this.sync())
    this.syncing = next
    void next.finally(() => {
      if (this.syncing === next) this.syncing = undefined
    })
    return next
  }

  stats(): HybridStats {
    const now = this.safeNow()
    const { rows } = this
    const dirtyKeys = rows.unsyncedCount + (this.book?.givingKeys() ?? 0)
    const since = this.lastSyncOrStart()
    return {
      trackedKeys: rows.size + (this.book?.size ?? 0) + (this.outage?.size ?? 0),
      dirtyKeys,
      lastSyncAtMs: this.lastGoodSyncAt,
      stalenessMs: Math.max(0, now - since),
      instances: this.instances,
      mode: this.health.anyDown(now, this.config.outageAfterMs) ? 'degraded' : 'synced',
      evictedUnsynced: this.evictedUnsynced,
      leaseRoundTrips: this.exchange?.roundTrips ?? 0,
      reservedUnits: this.book?.reservedUnits() ?? 0,
      syncPeriodMs: this.syncPeriodMs,
      overAdmittedByRule: new Map(this.overAdmittedByRule),
      leaseRoundTripsByRule: new Map(this.exchange?.roundTripsByRule),
    }
  }

  /**
   * Stops the timer and pushes what is left (waiting at most `syncTimeoutMs`), in strict mode
   * every slice given back; the client stays open unless `closeClient` is true.
   */
  async close(): Promise<void> {
    if (this.closed) return
    // Set first: a timer's sync that ends while this one waits must not schedule another.
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.book?.giveAllBack()
    if (this.rows.pendingKeys > 0 || (this.book?.listed.size ?? 0) > 0) await this.syncNow()
    else await this.syncing
    this.errors?.release()
    await this.config.closeClient?.()
  }

  /**
   * Whether decisions follow the outage policy at `now`: the last sync or round trip failed to
   * reach Redis, and none has for `outage.afterMs`. Time alone is not an outage: a clock that jumps forward (an
   * injected one, or a wall clock stepped) while syncs succeed leaves the store synced.
   */
  private degradedFor(targets: readonly StoreTarget[], now: number): boolean {
    const { health } = this
    if (!health.failing) return false
    const { outageAfterMs } = this.config
    if (!this.cluster) return health.isDown('', now, outageAfterMs)
    for (const target of targets) if (health.isDown(health.nodeOf(this.keyOf(target)), now, outageAfterMs)) return true
    return false
  }

  /** Whether the last exchange with a node that serves one of the targets failed. */
  private failingFor(targets: readonly StoreTarget[]): boolean {
    const { health } = this
    if (!health.failing) return false
    if (!this.cluster) return health.isFailing('')
    for (const target of targets) if (health.isFailing(health.nodeOf(this.keyOf(target)))) return true
    return false
  }

  /** Marks the nodes serving the targets as answering (`at`) or failed (undefined). */
  private heardFrom(targets: readonly StoreTarget[], at: number | undefined): void {
    // One node off a Cluster: no key to build.
    if (!this.cluster) {
      if (at === undefined) this.health.failed('', this.heartbeatKey)
      else this.health.answered('', at)
      return
    }
    for (const target of targets) {
      const key = this.keyOf(target)
      const node = this.health.nodeOf(key)
      if (at === undefined) this.health.failed(node, key)
      else this.health.answered(node, at)
    }
  }

  private lastSyncOrStart(): number {
    const contact = Math.max(this.lastGoodSyncAt, this.lastContactAt)
    return contact > 0 ? contact : this.startedAt
  }

  /** The target's row, listed for the next sync, the others' assumed units charged to its state. */
  private track(target: StoreTarget, now: number): number {
    const { rows } = this
    let row = rows.find(target.rule, target.identifier)
    if (row < 0 || rows.shape(row).windows !== target.windows) {
      const shape = rows.shapeOf(target.rule, target.algorithm as CounterAlgorithm, target.windows)
      if (row < 0) row = this.newRow(target.identifier, shape)
      else {
        this.pushEarlierUnits(row, shape)
        rows.reshape(row, shape)
      }
    }
    if (rows.touch(row)) this.listed.push(row)
    if (rows.others.size > 0) this.assumeOthers(row, now)
    return row
  }

  /** Before a key takes its rule's new limits, its units not yet pushed go under the old ones. */
  private pushEarlierUnits(row: number, shape: Shape): void {
    const { rows } = this
    const before = rows.shape(row)
    if (!rows.hasPending(row) || sameLimits(before.windows, shape.windows)) return
    const units = rows.takePending(row) as number[]
    const time = this.config.clock ? String(this.safeNow()) : '-'
    this.alone.push(row, rows.generation(row), rows.key(row), before, units, time)
  }

  /**
   * A new key's row: in a full table, a key's with nothing to push, else one's whose units are
   * pushed alone first, else (Redis failing, or every key looked at has a push under way) any
   * key's, its units lost.
   */
  private newRow(identifier: string, shape: Shape): number {
    const { rows } = this
    if (!rows.full || rows.evictSynced()) return rows.add(identifier, shape)
    // While Redis fails, a push of a forgotten key's units would only wait to be sent again, and a
    // flood of identifiers would pile them up: its units go with it, counted.
    if ((this.health.failing || !rows.evictPushing(this.pushForgotten)) && rows.evictAny()) {
      this.evictedUnsynced++
    }
    return rows.add(identifier, shape)
  }

  /** A key forgotten to make room: its units not yet pushed go to Redis at once, alone. */
  private readonly pushForgotten = (row: number, units: number[]): void => {
    const { rows } = this
    const time = this.config.clock ? String(this.safeNow()) : '-'
    this.alone.push(row, rows.generation(row), rows.key(row), rows.shape(row), units, time)
  }

  /**
   * Charges the units the other processes are assumed to have admitted since the key's last
   * sync (extrapolation), as far as they have not been charged yet.
   */
  private assumeOthers(row: number, now: number): void {
    const others = this.rows.others.get(row)
    if (others === undefined) return
    const due = Math.floor(others.perMs * (now - this.rows.syncedAt(row))) - others.assumed
    if (due <= 0) return
    const { model, windows } = this.rows.shape(row)
    const state = model.charge(this.rows.stateOf(row, now), windows, now, due)
    this.rows.setState(row, state, model.expiresAt(state, windows))
    others.assumed += due
  }

  private schedule(): void {
    if (this.closed) return
    const { syncIntervalMs } = this.config
    // ±10%, so that processes started together do not sync in step.
    const delay = Math.max(1, Math.round(syncIntervalMs * (0.9 + 0.2 * Math.random())))
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.syncNow().finally(() => this.schedule())
    }, delay)
    this.timer.unref()
  }

  private async sync(): Promise<SyncReport> {
    const started = performance.now()
    const report: SyncReport = {
      keys: 0,
      overAdmitted: 0,
      pushedUnits: 0,
      durationMs: 0,
      leaseRoundTrips: 0,
      reservedUnits: 0,
    }
    let time = '-'
    let now: number
    try {
      now = this.now()
      if (this.config.clock) time = String(now)
    } catch (error) {
      report.error = error as TollgateError
      return this.reported(report, started)
    }
    if (this.lastSyncStartAt > 0) {
      this.syncPeriodMs = now - this.lastSyncStartAt
      report.syncPeriodMs = this.syncPeriodMs
    }
    this.lastSyncStartAt = now
    const { book } = this
    const leases: Lease[] = book ? [...book.listed] : []
    book?.listed.clear()
    const batch = book ? [] : this.takeListed()
    report.keys = batch.length + leases.length
    for (const row of batch) report.pushedUnits += this.sendingUnitsOf(row)
    // Keys' names in Redis: on a Cluster, built first to group the keys by slot; else as each
    // chunk goes out, so that a sync of a million keys does not hold them all at once.
    const names = book
      ? leases.map((lease) => lease.key)
      : this.cluster
        ? batch.map((row) => this.rows.key(row))
        : undefined
    const nameOf = (at: number): string => (names ? (names[at] as string) : this.rows.key(batch[at] as number))
    // Alive for three periods: a process whose syncs run slow is still counted between them.
    const alive = 3 * Math.max(this.config.syncIntervalMs, this.syncPeriodMs)
    const heartbeat: [string, string] = [this.heartbeatKey, `${this.instance} ${alive}`]
    // The heartbeat rides with the first chunk; on a Cluster, whose chunks each hold one row, or
    // with nothing to sync, it goes alone.
    const calls: Array<{ indices: number[]; heartbeat: boolean }> = (
      names ? chunksOf(names, this.cluster) : rangesOf(batch.length)
    ).map((indices, i) => ({ indices, heartbeat: i === 0 && !this.cluster }))
    if (this.cluster || calls.length === 0) calls.unshift({ indices: [], heartbeat: true })
    const margin = this.marginMs()
    // Written with the chunks, so answered in the same round trip; a failure is the sync's to report.
    for (const [key, hearing] of this.riders) {
      ;(this.config.client as unknown as { get(key: string): Promise<string | null> }).get(key).then(
        (value) => {
          for (const onValue of hearing) onValue(value)
        },
        () => {},
      )
    }
    const firstKeys = calls.map((call) =>
      call.indices.length > 0 ? nameOf(call.indices[0] as number) : this.heartbeatKey,
    )
    // Calls whose master the client has not learned yet (it connects on its first command) count as one node.
    const order = inTurnByNode(firstKeys.map((key) => this.health.masterOf(key) ?? ''))
    const outcomes = startInTurn(
      calls.map((call) => () => {
        const keys = call.indices.map(nameOf)
        const beat = call.heartbeat ? heartbeat : undefined
        if (this.exchange) {
          const chunk = call.indices.map((at) => leases[at] as Lease)
          return this.exchange.syncChunk(chunk, keys, now, margin, beat, this.closed)
        }
        const chunk = call.indices.map((at) => batch[at] as number)
        return this.sendChunk(chunk, keys, time, beat)
      }),
      order,
    )
    // Pushes whose calls failed go again as they were, beside this sync's own.
    this.alone.resendDoubtful()
    for (const [key, outcome] of this.exchange?.resendDoubtful() ?? []) {
      firstKeys.push(key)
      outcomes.push(outcome)
    }
    for (const push of this.doubtful.splice(0)) {
      for (const row of push.chunk) report.pushedUnits += this.sendingUnitsOf(row)
      firstKeys.push(push.keysAndArgs[0] as string)
      outcomes.push(this.sendPush(push))
    }
    const nodes = firstKeys.map((key) => this.health.nodeOf(key))
    // A failing master this sync has nothing for is asked about a key it serves: its answer ends
    // its outage, and its keys' decisions follow the fleet's totals again.
    const covered = new Set(nodes)
    for (const [node, key] of [...this.health.probes()]) {
      if (covered.has(node)) continue
      nodes.push(node)
      firstKeys.push(key)
      outcomes.push(this.probe(key))
    }
    // Each call's outcome as it settles. The wait is for Redis's silence, not for the whole sync: a
    // sync of many keys takes as long as it takes while calls keep answering; once none has
    // answered for syncTimeoutMs, the nodes of those still out failed.
    const settled: Array<ChunkOutcome | LeaseChunkOutcome | Error | undefined> = outcomes.map(() => undefined)
    let heardAt = performance.now()
    const all = Promise.all(
      outcomes.map((outcome, i) =>
        outcome.then((value) => {
          heardAt = performance.now()
          settled[i] = value
        }),
      ),
    )
    const timedOut = Symbol('timed out')
    const { syncTimeoutMs } = this.config
    let timer: NodeJS.Timeout | undefined
    const silence = new Promise<typeof timedOut>((resolve) => {
      const check = (): void => {
        const quiet = performance.now() - heardAt
        if (quiet >= syncTimeoutMs) resolve(timedOut)
        else {
          timer = setTimeout(check, syncTimeoutMs - quiet)
          timer.unref()
        }
      }
      timer = setTimeout(check, syncTimeoutMs)
      timer.unref()
    })
    if ((await Promise.race([all, silence])) === timedOut) {
      report.error = this.failure(`the sync heard nothing from Redis for ${syncTimeoutMs} ms`)
    }
    clearTimeout(timer)
    const failedNodes = new Set<string>()
    settled.forEach((outcome, i) => {
      if (outcome === undefined || outcome instanceof Error) failedNodes.add(nodes[i] as string)
      if (outcome === undefined) return
      if (outcome instanceof Error) {
        report.error ??= this.failure(`the sync failed: ${outcome.message}`, outcome)
        return
      }
      report.overAdmitted += outcome.overAdmitted
      if (outcome.instances !== undefined) {
        report.instances = outcome.instances
        this.instances = Math.max(1, outcome.instances)
      }
      if (outcome.keyError) report.error ??= outcome.keyError
    })
    const earlier = this.alone.takeCounts()
    report.overAdmitted += earlier.overAdmitted
    report.pushedUnits += earlier.pushedUnits
    const at = this.safeNow()
    for (const node of nodes) if (!failedNodes.has(node)) this.health.answered(node, at)
    firstKeys.forEach((key, i) => {
      const node = nodes[i] as string
      if (failedNodes.has(node)) this.health.failed(node, key)
    })
    if (failedNodes.size === 0) this.synced(report)
    return this.reported(report, started)
  }

  /** Asks the node serving `key` whether it holds it: an outcome of a sync that pushes nothing. */
  private probe(key: string): Promise<ChunkOutcome | Error> {
    const client = this.config.client as unknown as { exists(key: string): Promise<number> }
    return client.exists(key).then(
      () => ({ overAdmitted: 0, instances: undefined }),
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    )
  }

  /** The listed keys, their units moved to `sending`; a key whose last push is still under way waits for the next sync. */
  private takeListed(): number[] {
    const { rows } = this
    const batch: number[] = []
    this.listed.filter((row) => {
      if (!rows.listed(row)) return false
      if (rows.isSending(row)) return true
      rows.unlist(row)
      rows.startSending(row)
      batch.push(row)
      return false
    })
    return batch
  }

  /**
   * Sends one chunk, under an operation's key that makes its push apply once however often it is
   * sent (a client resending it after a lost reply, or this store after a failed call).
   */
  private sendChunk(
    chunk: number[],
    keys: string[],
    time: string,
    heartbeat: [string, string] | undefined,
  ): Promise<ChunkOutcome | Error> {
    const { rows } = this
    // A row may be given to another key before the answer comes: the answer is the key's.
    const generations = chunk.map((row) => rows.generation(row))
    // Only a push needs one: a chunk that only reads writes nothing that could count twice.
    const pushes = chunk.some((row) => rows.isSending(row))
    const operationKey = pushes ? operationKeyBeside(this.keys.prefix, keys[0] as string) : undefined
    const { keyCount, keysAndArgs } = chunkArguments(pushEntries(rows, chunk), keys, time, heartbeat, operationKey)
    return this.sendPush({ chunk, generations, keys, time, keyCount, keysAndArgs, since: performance.now() })
  }

  /**
   * Sends a push and applies its answer whenever it comes, even after the sync stopped waiting:
   * units Redis took are never pushed again, and those it did not take are. A push whose call
   * failed may still have reached Redis: it is sent again as it was, under the same operation
   * key, at the next sync, until Redis answers it; only past the key's life (lua/lib/operation.lua)
   * do its units go back to be pushed with the next ones, where Redis may count them twice (never
   * too few).
   */
  private async sendPush(push: DoubtfulPush): Promise<ChunkOutcome | Error> {
    const { rows } = this
    const { chunk, generations, keys, time } = push
    const sentAt = performance.now()
    let answer: ChunkAnswer
    try {
      answer = readChunkReply(await this.sent(push.keyCount, push.keysAndArgs), keys)
    } catch (error) {
      // Redis answering with an error ran nothing (OOM, say): no doubt, the units go back.
      if (chunk.length > 0 && resendAsItWas(error, push.since)) this.doubtful.push(push)
      else for (const [i, row] of chunk.entries()) this.requeue(row, generations[i] as number)
      return error instanceof Error ? error : new Error(String(error))
    }
    this.aligned?.measured(answer.serverMs, sentAt, performance.now())
    const syncedAt = time === '-' ? answer.serverMs : Number(time)
    // Not before any unit admitted here: a clock a few ms ahead of Redis's stamps units after
    // the sync's time, which Redis moves back to it (lua/lib/counter_state.lua, lua/lib/bucket.lua).
    const comparedAt = Math.max(syncedAt, this.safeNow())
    let overAdmitted = 0
    let keyError: TollgateError | undefined
    chunk.forEach((row, i) => {
      const value = answer.values[i]
      if (value === undefined || !rows.holds(row, generations[i] as number)) return
      if (value instanceof TollgateError) {
        // A key Redis cannot hold these units in (another type) would fail every sync: dropped.
        rows.endSending(row)
        keyError ??= value
        return
      }
      const over = answer.overAdmitted?.get(i) ?? 0
      if (over > 0) {
        overAdmitted += over
        this.overAdmitted(rows.shape(row).rule, over)
      }
      this.applySynced(row, value, syncedAt, comparedAt)
    })
    return keyError
      ? { overAdmitted, instances: answer.instances, keyError }
      : { overAdmitted, instances: answer.instances }
  }

  /** The units a key's push under way carries, summed (0 for none). */
  private sendingUnitsOf(row: number): number {
    const { rows } = this
    return rows.sendsOneSegment(row) ? rows.sendingUnitsOf(row) : pendingUnits(rows.sendingOf(row))
  }

  private overAdmitted(rule: string, units: number): void {
    this.overAdmittedByRule.set(rule, (this.overAdmittedByRule.get(rule) ?? 0) + units)
  }

  /** Puts a failed push's units back before those admitted since, for the next sync. */
  private requeue(row: number, generation: number): void {
    const { rows } = this
    if (!rows.holds(row, generation)) return
    const sending = rows.endSending(row)
    if (sending !== undefined) {
      rows.putBack(row, sending)
    }
    if (rows.list(row)) this.listed.push(row)
  }

  /**
   * The fleet's state after the push becomes this key's, with the units admitted here while the
   * sync was under way charged again on top. With `extrapolate`, the units the others admitted
   * since the key's last sync set the rate they are assumed to go on at: the fleet's state and
   * this process's are read at `comparedAt`, no earlier than the sync or any unit admitted here.
   */
  private applySynced(row: number, after: string, syncedAt: number, comparedAt: number): void {
    const { rows } = this
    const { algorithm, windows, model } = rows.shape(row)
    rows.endSending(row)
    const pending = rows.pendingOf(row)
    const baseline = toModelState(algorithm, windows, decodeCounterState(algorithm, windows, after || null), true)
    const state = withUnits(model, windows, baseline, pending)
    const previousSync = rows.syncedAt(row)
    const first = windows[0]
    if (this.config.extrapolate && first !== undefined && previousSync > 0 && syncedAt > previousSync) {
      // The fleet's state and this process's differ by what the others admitted and what this
      // process assumed they did: both hold every unit admitted here, applied the same way. Used
      // counts compared as the model reads them at one time, not units summed, so that units a
      // window has stopped counting or a bucket has refilled read as none in both. Both full,
      // they tell nothing new and what was assumed stands: under the load of
      // test/tests/hybrid-bound.test.ts, comparing units past the limit too let a sliding window
      // over-admit 43 units a window on average, against 25 so.
      const assumed = rows.others.get(row)?.assumed ?? 0
      const local = usedOf(model, rows.stateOf(row, comparedAt), first, comparedAt)
      const others = usedOf(model, state, first, comparedAt) - local + assumed
      const perMs = Math.max(0, others) / (syncedAt - previousSync)
      if (perMs > 0) {
        rows.others.set(row, { perMs, assumed: 0 })
        // Pulled again at the next sync, decided on or not: a rate assumed is never older than one
        // sync, and a burst the others made once is not charged again after they stopped.
        if (rows.list(row)) this.listed.push(row)
      } else rows.others.delete(row)
    }
    rows.setState(row, state, state === undefined ? 0 : model.expiresAt(state, windows))
    rows.setSyncedAt(row, syncedAt)
  }

  /** A sync that reached Redis for every chunk: the store is synced again. */
  private synced(report: SyncReport): void {
    this.lastGoodSyncAt = this.safeNow()
    if (this.degradedNoticed && !this.health.failing) {
      this.degradedNoticed = false
      this.outage = undefined
      this.config.warn(
        "HybridStore: syncs reach Redis again; decisions follow the fleet's totals",
        'TG_HYBRID_RECOVERED',
      )
    }
    this.sweep()
    this.book?.sweep(this.safeNow())
    if (report.instances === undefined) report.instances = this.instances
  }

  /** Drops keys whose state expired and that hold nothing to push, a slice at a time. */
  private sweep(): void {
    const now = this.safeNow()
    const { rows } = this
    rows.sweep(SWEEP_PER_SYNC, (row) => !rows.listed(row) && !rows.unsynced(row) && rows.expiresAt(row) <= now)
  }

  private noticeDegraded(now: number): void {
    if (this.degradedNoticed) return
    this.degradedNoticed = true
    const { outagePolicy, outageAfterMs } = this.config
    this.config.warn(
      `HybridStore: no sync has reached Redis for ${now - this.lastSyncOrStart()} ms (outage.afterMs ${outageAfterMs}); decisions follow the outage policy '${outagePolicy}' until one does`,
      'TG_HYBRID_DEGRADED',
    )
  }

  private outageError(now: number): TollgateError {
    return this.failure(`no sync has reached Redis for ${now - this.lastSyncOrStart()} ms`)
  }

  private failure(message: string, cause?: unknown): TollgateError {
    const recent = this.errors?.recent
    const said = recent ? `; the store last said: ${recent.message}` : ''
    return new TollgateError('TG_STORE', `${message}${said}`, { storeDown: true, cause: cause ?? recent })
  }

  private reported(report: SyncReport, started: number): SyncReport {
    report.durationMs = performance.now() - started
    this.noticeSlow(report.durationMs)
    if (this.exchange && this.book) {
      report.leaseRoundTrips = this.exchange.roundTrips - this.roundTripsReported
      this.roundTripsReported = this.exchange.roundTrips
      report.reservedUnits = this.book.reservedUnits()
    }
    this.emit('sync', report)
    return report
  }

  /**
   * A sync longer than the interval lengthens the real period, and with it the staleness and the
   * over-admission bound: said once (`TG_HYBRID_SYNC_SLOW`) until a sync ends within the interval.
   */
  private noticeSlow(durationMs: number): void {
    const { syncIntervalMs } = this.config
    if (durationMs <= syncIntervalMs) {
      this.slowNoticed = false
      return
    }
    if (this.slowNoticed) return
    this.slowNoticed = true
    this.config.warn(
      `HybridStore: a sync took ${Math.round(durationMs)} ms, longer than syncIntervalMs ${syncIntervalMs}: the real period (stats().syncPeriodMs) sets the over-admission bound, and grows with the keys a sync carries; see docs/hybrid.md, "Capacity"`,
      'TG_HYBRID_SYNC_SLOW',
    )
  }

  /** The store's time, or the last good sync's when its clock fails (the sync reports that failure). */
  private safeNow(): number {
    try {
      return this.now()
    } catch {
      return this.lastGoodSyncAt
    }
  }
}

/** What one chunk of a sync answered. */
type ChunkOutcome = { overAdmitted: number; instances: number | undefined; keyError?: TollgateError }

/** A chunk's push as it was sent: sent again so, under the same operation key, until answered. */
interface DoubtfulPush {
  chunk: number[]
  generations: number[]
  keys: string[]
  time: string
  keyCount: number
  keysAndArgs: string[]
  /** `performance.now()` when it was first sent. */
  since: number
}

/** Whether two lists of windows hold the same limits, window by window. */
function sameLimits(a: readonly Window[], b: readonly Window[]): boolean {
  return a.length === b.length && a.every((window, i) => window.limit === b[i]?.limit)
}
