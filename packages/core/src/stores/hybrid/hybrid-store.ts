import { EventEmitter } from 'node:events'
import type { Decision } from '../../rules/decision.js'
import type { AlgorithmName } from '../../rules/rules.js'
import { ANSWERS_INTO } from '../shared/answers-into.js'
import type { TargetSlot } from '../shared/decision-targets.js'
import { DECIDES_IN_PROCESS, type LocalCall } from '../shared/local-decision.js'
import { keysReset } from '../shared/reset-once.js'
import type { Store, StoreReceiver, StoreRequest, StoreResult, StoreTarget } from '../store.js'
import { ApproximateMode } from './approximate.js'
import type { HybridMode } from './mode.js'
import { type HybridConfig, type HybridStoreOptions, hybridConfigOf } from './options.js'
import { Outage } from './outage.js'
import { RedisLink } from './redis-link.js'
import type { HybridStats, SyncReport } from './reports.js'
import { StrictMode } from './strict.js'
import { SyncRounds } from './sync-round.js'

export interface HybridStoreEvents {
  sync: [report: SyncReport]
}

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
  private readonly link: RedisLink
  private readonly outage: Outage
  private readonly mode: HybridMode
  private readonly rounds: SyncRounds
  /** Keys read on each sync, and who hears their values. */
  private readonly readsEachSync = new Map<string, Set<(value: string | null) => void>>()
  private readonly resetKeys: ReturnType<typeof keysReset>
  private syncing: Promise<SyncReport> | undefined
  private timer: NodeJS.Timeout | undefined
  /** No sync is scheduled after `close()`, and a decision waiting for room stops. */
  private closed = false

  constructor(options: HybridStoreOptions) {
    super()
    this.config = hybridConfigOf(options)
    const { connection, prefix } = this.config
    this.link = new RedisLink(this.config)
    this.outage = new Outage(this.link, this.config)
    this.mode = this.config.strict
      ? new StrictMode(this.link, this.outage, this.config)
      : new ApproximateMode(this.link, this.outage, this.config, {
          syncNow: () => this.syncNow(),
          closed: () => this.closed,
        })
    this.rounds = new SyncRounds(this.link, this.config, this.mode, this.outage, this.readsEachSync)
    this.supportedAlgorithms = this.mode.algorithms
    const { mode } = this
    this.evaluateSync = (request) => mode.decide(request)
    this.resetKeys = keysReset(connection, prefix)
    if (this.config.autoSync) this.schedule()
  }

  /** @internal The limiter's one-pass decision (stores/shared/local-decision.ts); not part of the public API. */
  [DECIDES_IN_PROCESS](call: LocalCall, targets: readonly TargetSlot[], count: number): Decision | undefined {
    return this.mode.decideInProcess?.(call, targets, count)
  }

  /** The Redis key that holds a target's state: a RedisStore's with the same prefix. */
  keyOf(target: StoreTarget): string {
    return this.link.keyOf(target)
  }

  evaluate(request: StoreRequest): Promise<StoreResult> {
    try {
      const result = this.mode.decide(request)
      if (result !== undefined) return Promise.resolve(result)
      return this.mode.ask(request)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** @deprecated The limiter answers through the store's receiver itself; call `evaluate`. */
  evaluateInto(request: StoreRequest, receiver: StoreReceiver): void {
    this[ANSWERS_INTO](request, receiver)
  }

  /**
   * @internal A decision `evaluateSync` left to Redis: strict mode's round trip, or approximate
   * mode's read of keys the table had no room for (stores/shared/answers-into.ts).
   */
  [ANSWERS_INTO](request: StoreRequest, receiver: StoreReceiver): void {
    this.mode.ask(request, receiver).then(
      (result) => receiver.answer(result),
      (error: unknown) => receiver.fail(error),
    )
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
      this.mode.forget(target)
      keys.push(key, `${key}:prev`)
    }
    await this.resetKeys(keys, targets, this.link.timeArg(this.link.now()))
    this.link.errors.answered()
  }

  recentError(): Error | undefined {
    return this.link.errors.recent
  }

  readOnEachSync(key: string, onValue: (value: string | null) => void): () => void {
    let hearing = this.readsEachSync.get(key)
    if (hearing === undefined) {
      hearing = new Set()
      this.readsEachSync.set(key, hearing)
    }
    hearing.add(onValue)
    return () => {
      hearing.delete(onValue)
      if (hearing.size === 0) this.readsEachSync.delete(key)
    }
  }

  /**
   * Pushes every unit admitted here since the last sync and pulls the fleet's totals of every key
   * decided on since; resolves when done. One sync at a time: a call while one runs waits for it,
   * then syncs. A store failure never rejects: the report says it (`error`).
   */
  syncNow(): Promise<SyncReport> {
    const previous = this.syncing ?? Promise.resolve(undefined)
    const next = previous.then(async () => {
      const report = await this.rounds.run(this.closed)
      this.emit('sync', report)
      return report
    })
    this.syncing = next
    void next.finally(() => {
      if (this.syncing === next) this.syncing = undefined
    })
    return next
  }

  stats(): HybridStats {
    const { link } = this
    const now = link.safeNow()
    const counts = this.mode.counts()
    return {
      trackedKeys: counts.trackedKeys + this.outage.size,
      dirtyKeys: counts.dirtyKeys,
      lastSyncAtMs: link.lastGoodSyncAt,
      stalenessMs: Math.max(0, now - link.lastSyncOrStart()),
      instances: link.instances,
      mode: link.health.anyDown(now, this.config.outageAfterMs) ? 'degraded' : 'synced',
      evictedUnsynced: counts.evictedUnsynced,
      leaseRoundTrips: counts.leaseRoundTrips,
      reservedUnits: counts.reservedUnits,
      syncPeriodMs: this.rounds.periodMs,
      overAdmittedByRule: new Map(counts.overAdmittedByRule),
      leaseRoundTripsByRule: new Map(counts.leaseRoundTripsByRule),
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
    this.mode.close()
    if (this.mode.unsent()) await this.syncNow()
    else await this.syncing
    this.link.errors.release()
    await this.config.closeClient?.()
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
}
