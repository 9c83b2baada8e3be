import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { timeFrom } from '../clock.js'
import { TollgateError } from '../errors.js'
import { KeyBuilder } from '../keys.js'
import type { AlgorithmName } from '../rules.js'
import { leaseScript, syncScript } from '../scripts/generated.js'
import { isStoreDown } from '../store-errors.js'
import { ClientErrors, type ErrorEvents } from './client-errors.js'
import { evaluateLocally } from './evaluate-locally.js'
import { pendingUnits } from './hybrid-bucket-fold.js'
import { ServerAlignedClock } from './hybrid-clock.js'
import { hybridInstancesKey } from './hybrid-instances.js'
import { type Lease, LeaseBook } from './hybrid-lease-book.js'
import { LeaseExchange } from './hybrid-leases.js'
import { type HybridConfig, type HybridStoreOptions, hybridConfigOf } from './hybrid-options.js'
import { OutageTable } from './hybrid-outage.js'
import { record, usedOf, withUnits } from './hybrid-segments.js'
import { KeySlots, SlotList } from './hybrid-slots.js'
import { type ChunkAnswer, chunkArguments, chunksOf, readChunkReply, type SyncCommand } from './hybrid-sync.js'
import { operationKeyBeside, resendAsItWas } from './operations.js'
import { type CounterAlgorithm, decodeCounterState, toModelState } from './redis-state.js'
import { ReplyWatches } from './reply-watch.js'
import { keysReset } from './reset-once.js'
import type { Store, StoreReceiver, StoreRequest, StoreResult, StoreTarget } from './store.js'

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
  /** Keys dropped by `maxTrackedKeys` with units not yet pushed: those units never reach Redis. */
  evictedUnsynced: number
  /** Strict mode: decisions that waited on Redis since the store started (0 in approximate mode). */
  leaseRoundTrips: number
  /** Strict mode: units this process holds reserved in Redis now (0 in approximate mode). */
  reservedUnits: number
  /**
   * Every sync's `overAdmitted` since the store was made, by rule: units this process pushed
   * above a window's limit. Rules that never over-admitted are absent. A rule is named as its
   * keys are, by its `stateName`: `name@digest` for a live rule whose shape changed (the metrics
   * packages label it with its name).
   * @example new Map([['api', 12]])
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
 * Decides in the process, on counters it syncs with Redis about once a second (the YARL design):
 * a decision never waits on Redis and costs what an in-process decision costs, and Redis sees one
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
 * round trip (`hybrid-lease-book.ts` says why that is exact).
 */
export class HybridStore extends EventEmitter<HybridStoreEvents> implements Store {
  readonly supportedAlgorithms: readonly AlgorithmName[]
  /**
   * In approximate mode, always an answer; in strict mode, undefined for a consume that its
   * slices do not cover, which `evaluate` decides in Redis.
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
  private readonly slots: KeySlots
  /** Slots of the keys the next sync pushes or pulls. */
  private readonly listed: SlotList
  /** Each decision's slots, in target order, reused by every decision rather than allocated for each. */
  private tracked: number[] = []
  private readonly instance = `${process.pid}-${randomBytes(6).toString('hex')}`
  private readonly heartbeatKey: string
  private readonly errors: ClientErrors | undefined
  private readonly resetKeys: ReturnType<typeof keysReset>
  private readonly startedAt: number
  private lastGoodSyncAt = 0
  /** Whether the last exchange with Redis that ended (a sync, a lease round trip) failed to reach it. */
  private redisFailing = false
  private instances = 1
  private degradedNoticed = false
  private outage: OutageTable | undefined
  private evictedUnsynced = 0
  private readonly overAdmittedByRule = new Map<string, number>()
  private syncing: Promise<SyncReport> | undefined
  /** Pushes whose calls failed, their units still `sending`: sent again as they were at the next sync. */
  private readonly doubtful: DoubtfulPush[] = []
  private timer: NodeJS.Timeout | undefined
  private closed = false

  constructor(options: HybridStoreOptions) {
    super()
    this.config = hybridConfigOf(options)
    const { client, prefix, clock } = this.config
    this.keys = new KeyBuilder(prefix)
    this.slots = new KeySlots(this.config.maxTrackedKeys, this.keys)
    this.listed = new SlotList(this.config.maxTrackedKeys)
    this.heartbeatKey = hybridInstancesKey(prefix)
    this.cluster = (client as { isCluster?: unknown }).isCluster === true
    const commands = client as unknown as Record<string, SyncCommand | undefined>
    if (typeof commands[COMMAND] !== 'function') client.defineCommand(COMMAND, { lua: syncScript.lua })
    this.runSync = (commands[COMMAND] as SyncCommand).bind(client)
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
        watches: new ReplyWatches(client, this.cluster),
        operationKey: (key) => operationKeyBeside(prefix, key),
        timeOf: (now) => (this.config.clock ? String(now) : '-'),
        instances: () => this.instances,
        answered: (serverMs, sentAt) => {
          this.errors?.answered()
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
    if (this.config.autoSync) this.schedule()
  }

  /** The Redis key that holds a target's state: a RedisStore's with the same prefix. */
  keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }

  evaluate(request: StoreRequest): Promise<StoreResult> {
    try {
      const result = this.evaluateSync(request)
      return result !== undefined ? Promise.resolve(result) : this.roundTrip(request)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Strict mode's round trip for a decision `evaluateSync` left to Redis; in approximate mode, its answer. */
  evaluateInto(request: StoreRequest, receiver: StoreReceiver): void {
    if (!this.config.strict) {
      this.evaluate(request).then(
        (result) => receiver.answer(result),
        (error: unknown) => receiver.fail(error),
      )
      return
    }
    this.roundTrip(request, receiver).then(
      (result) => receiver.answer(result),
      (error: unknown) => receiver.fail(error),
    )
  }

  /** Approximate mode's decision: in the process, on the last synced totals. */
  private decide(request: StoreRequest): StoreResult {
    const now = this.now()
    const { operation, targets, cost } = request
    const degraded = this.degradedAt(now)
    if (degraded) this.noticeDegraded(now)
    const { slots } = this
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
      for (let t = 0; t < count; t++) keys[t] = slots.key(tracked[t] as number)
      result = this.outageResult(keys, request, now)
      if (result.outage?.policy === 'local' && operation === 'consume' && result.allowed && cost > 0) {
        for (let t = 0; t < count; t++) {
          const slot = tracked[t] as number
          const { model, windows } = slots.shape(slot)
          const charged = model.charge(slots.stateOf(slot, now), windows, now, cost)
          slots.setState(slot, charged, model.expiresAt(charged, windows))
        }
      }
    } else {
      result = evaluateLocally(slots.table, tracked, request, now)
    }
    const units = operation === 'refund' ? -cost : operation === 'consume' && result.allowed ? cost : 0
    if (units !== 0) {
      for (let t = 0; t < count; t++) {
        const slot = tracked[t] as number
        record(slots, slot, slots.shape(slot), now, units)
        slots.markUsed(slot)
        if (slots.list(slot)) this.listed.push(slot)
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
    if (!this.degradedAt(now)) return undefined
    this.noticeDegraded(now)
    return this.outageResult(
      leases.map((lease) => lease.key),
      request,
      now,
    )
  }

  /** A decision its slices did not cover, made in Redis. */
  private async roundTrip(request: StoreRequest, asker?: StoreReceiver): Promise<StoreResult> {
    const now = this.now()
    const book = this.book as LeaseBook
    const leases: Lease[] = request.targets.map((target) => book.leaseOf(target))
    try {
      const result = await (this.exchange as LeaseExchange).decide(request, leases, now, asker)
      this.lastContactAt = this.safeNow()
      this.redisFailing = false
      return result
    } catch (error) {
      if (isStoreDown(error)) this.redisFailing = true
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
      const slot = this.slots.find(target.rule, target.identifier)
      if (slot >= 0) this.slots.remove(slot)
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
    const { slots } = this
    let dirtyKeys = slots.pendingKeys + (this.book?.givingKeys() ?? 0)
    for (const slot of slots.sending.keys()) if (!slots.hasPending(slot)) dirtyKeys++
    const since = this.lastSyncOrStart()
    return {
      trackedKeys: slots.size + (this.book?.size ?? 0) + (this.outage?.size ?? 0),
      dirtyKeys,
      lastSyncAtMs: this.lastGoodSyncAt,
      stalenessMs: Math.max(0, now - since),
      instances: this.instances,
      mode: this.degradedAt(now) ? 'degraded' : 'synced',
      evictedUnsynced: this.evictedUnsynced,
      leaseRoundTrips: this.exchange?.roundTrips ?? 0,
      reservedUnits: this.book?.reservedUnits() ?? 0,
      overAdmittedByRule: new Map(this.overAdmittedByRule),
      leaseRoundTripsByRule: new Map(this.exchange?.roundTripsByRule),
    }
  }

  /**
   * Stops the timer and pushes what is left (waiting at most `syncTimeoutMs`), in strict mode
   * every slice given back; the client stays open.
   */
  async close(): Promise<void> {
    if (this.closed) return
    // Set first: a timer's sync that ends while this one waits must not schedule another.
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.book?.giveAllBack()
    if (this.slots.pendingKeys > 0 || (this.book?.listed.size ?? 0) > 0) await this.syncNow()
    else await this.syncing
    this.errors?.release()
  }

  /**
   * Whether decisions follow the outage policy at `now`: the last sync or round trip failed to
   * reach Redis, and none has for `outage.afterMs`. Time alone is not an outage: a clock that jumps forward (an
   * injected one, or a wall clock stepped) while syncs succeed leaves the store synced.
   */
  private degradedAt(now: number): boolean {
    return this.redisFailing && now - this.lastSyncOrStart() > this.config.outageAfterMs
  }

  private lastSyncOrStart(): number {
    const contact = Math.max(this.lastGoodSyncAt, this.lastContactAt)
    return contact > 0 ? contact : this.startedAt
  }

  /** The target's slot, listed for the next sync, the others' assumed units charged to its state. */
  private track(target: StoreTarget, now: number): number {
    const { slots } = this
    let slot = slots.find(target.rule, target.identifier)
    if (slot < 0 || slots.shape(slot).windows !== target.windows) {
      const shape = slots.shapeOf(target.rule, target.algorithm as CounterAlgorithm, target.windows)
      if (slot < 0) slot = slots.add(target.identifier, shape, this.onEvict)
      else slots.reshape(slot, shape)
    }
    if (slots.touch(slot)) this.listed.push(slot)
    if (slots.others.size > 0) this.assumeOthers(slot, now)
    return slot
  }

  private readonly onEvict = (): void => {
    this.evictedUnsynced++
  }

  /**
   * Charges the units the other processes are assumed to have admitted since the key's last
   * sync (extrapolation), as far as they have not been charged yet.
   */
  private assumeOthers(slot: number, now: number): void {
    const others = this.slots.others.get(slot)
    if (others === undefined) return
    const due = Math.floor(others.perMs * (now - this.slots.syncedAt(slot))) - others.assumed
    if (due <= 0) return
    const { model, windows } = this.slots.shape(slot)
    const state = model.charge(this.slots.stateOf(slot, now), windows, now, due)
    this.slots.setState(slot, state, model.expiresAt(state, windows))
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
    const { book } = this
    const leases: Lease[] = book ? [...book.listed] : []
    book?.listed.clear()
    const batch = book ? [] : this.takeListed()
    report.keys = batch.length + leases.length
    for (const slot of batch) report.pushedUnits += pendingUnits(this.slots.sending.get(slot))
    // Each key's name in Redis, built once per sync: it groups the keys by Cluster slot and goes in the script's KEYS.
    const names = book ? leases.map((lease) => lease.key) : batch.map((slot) => this.slots.key(slot))
    const heartbeat: [string, string] = [this.heartbeatKey, `${this.instance} ${3 * this.config.syncIntervalMs}`]
    // The heartbeat rides with the first chunk; on a Cluster, whose chunks each hold one slot, or
    // with nothing to sync, it goes alone.
    const calls: Array<{ indices: number[]; names: string[]; heartbeat: boolean }> = chunksOf(names, this.cluster).map(
      (indices, i) => ({
        indices,
        names: indices.map((at) => names[at] as string),
        heartbeat: i === 0 && !this.cluster,
      }),
    )
    if (this.cluster || calls.length === 0) calls.unshift({ indices: [], names: [], heartbeat: true })
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
    const outcomes = calls.map((call) => {
      const beat = call.heartbeat ? heartbeat : undefined
      if (this.exchange) {
        const chunk = call.indices.map((at) => leases[at] as Lease)
        return this.exchange.syncChunk(chunk, call.names, now, margin, beat, this.closed)
      }
      const chunk = call.indices.map((at) => batch[at] as number)
      return this.sendChunk(chunk, call.names, time, beat)
    })
    // Pushes whose calls failed go again as they were, beside this sync's own.
    if (this.exchange) outcomes.push(...this.exchange.resendDoubtful())
    for (const push of this.doubtful.splice(0)) {
      for (const slot of push.chunk) report.pushedUnits += pendingUnits(this.slots.sending.get(slot))
      outcomes.push(this.sendPush(push))
    }
    const timedOut = Symbol('timed out')
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<typeof timedOut>((resolve) => {
      timer = setTimeout(() => resolve(timedOut), this.config.syncTimeoutMs)
      timer.unref()
    })
    const settled = await Promise.race([Promise.all(outcomes), deadline])
    clearTimeout(timer)
    if (settled === timedOut) {
      this.redisFailing = true
      report.error = this.failure(`the sync did not answer within ${this.config.syncTimeoutMs} ms`)
      return this.reported(report, started)
    }
    for (const outcome of settled) {
      if (outcome instanceof Error) {
        this.redisFailing = true
        report.error ??= this.failure(`the sync failed: ${outcome.message}`, outcome)
        continue
      }
      report.overAdmitted += outcome.overAdmitted
      if (outcome.instances !== undefined) {
        report.instances = outcome.instances
        this.instances = Math.max(1, outcome.instances)
      }
      if (outcome.keyError) report.error ??= outcome.keyError
    }
    if (!settled.some((outcome) => outcome instanceof Error)) this.synced(report)
    return this.reported(report, started)
  }

  /** The listed keys, their units moved to `sending`; a key whose last push is still under way waits for the next sync. */
  private takeListed(): number[] {
    const { slots } = this
    const batch: number[] = []
    this.listed.filter((slot) => {
      if (!slots.listed(slot)) return false
      if (slots.sending.has(slot)) return true
      slots.unlist(slot)
      const pending = slots.takePending(slot)
      if (pending !== undefined) slots.sending.set(slot, pending)
      batch.push(slot)
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
    const { slots } = this
    // A slot may be given to another key before the answer comes: the answer is the key's.
    const generations = chunk.map((slot) => slots.generation(slot))
    // Only a push needs one: a chunk that only reads writes nothing that could count twice.
    const pushes = chunk.some((slot) => slots.sending.get(slot) !== undefined)
    const operationKey = pushes ? operationKeyBeside(this.keys.prefix, keys[0] as string) : undefined
    const { keyCount, keysAndArgs } = chunkArguments(slots, chunk, keys, time, heartbeat, operationKey)
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
    const { slots } = this
    const { chunk, generations, keys, time } = push
    const sentAt = performance.now()
    let answer: ChunkAnswer
    try {
      answer = readChunkReply(await this.runSync(push.keyCount, ...push.keysAndArgs), keys)
    } catch (error) {
      // Redis answering with an error ran nothing (OOM, say): no doubt, the units go back.
      if (chunk.length > 0 && resendAsItWas(error, push.since)) this.doubtful.push(push)
      else for (const [i, slot] of chunk.entries()) this.requeue(slot, generations[i] as number)
      return error instanceof Error ? error : new Error(String(error))
    }
    this.errors?.answered()
    this.aligned?.measured(answer.serverMs, sentAt, performance.now())
    const syncedAt = time === '-' ? answer.serverMs : Number(time)
    // Not before any unit admitted here: a clock a few ms ahead of Redis's stamps units after
    // the sync's time, which Redis moves back to it (lua/lib/counter_state.lua, lua/lib/bucket.lua).
    const comparedAt = Math.max(syncedAt, this.safeNow())
    let overAdmitted = 0
    let keyError: TollgateError | undefined
    chunk.forEach((slot, i) => {
      const value = answer.values[i]
      if (value === undefined || !slots.holds(slot, generations[i] as number)) return
      if (value instanceof TollgateError) {
        // A key Redis cannot hold these units in (another type) would fail every sync: dropped.
        slots.sending.delete(slot)
        keyError ??= value
        return
      }
      overAdmitted += value.overAdmitted
      if (value.overAdmitted > 0) this.overAdmitted(slots.shape(slot).rule, value.overAdmitted)
      this.applySynced(slot, value.after, syncedAt, comparedAt)
    })
    return keyError
      ? { overAdmitted, instances: answer.instances, keyError }
      : { overAdmitted, instances: answer.instances }
  }

  private overAdmitted(rule: string, units: number): void {
    this.overAdmittedByRule.set(rule, (this.overAdmittedByRule.get(rule) ?? 0) + units)
  }

  /** Puts a failed push's units back before those admitted since, for the next sync. */
  private requeue(slot: number, generation: number): void {
    const { slots } = this
    if (!slots.holds(slot, generation)) return
    const sending = slots.sending.get(slot)
    slots.sending.delete(slot)
    if (sending !== undefined) {
      slots.putBack(slot, sending)
    }
    if (slots.list(slot)) this.listed.push(slot)
  }

  /**
   * The fleet's state after the push becomes this key's, with the units admitted here while the
   * sync was under way charged again on top. With `extrapolate`, the units the others admitted
   * since the key's last sync set the rate they are assumed to go on at: the fleet's state and
   * this process's are read at `comparedAt`, no earlier than the sync or any unit admitted here.
   */
  private applySynced(slot: number, after: string, syncedAt: number, comparedAt: number): void {
    const { slots } = this
    const { algorithm, windows, model } = slots.shape(slot)
    slots.sending.delete(slot)
    const pending = slots.pendingOf(slot)
    const baseline = toModelState(algorithm, windows, decodeCounterState(algorithm, windows, after || null), true)
    const state = withUnits(model, windows, baseline, pending)
    const previousSync = slots.syncedAt(slot)
    const first = windows[0]
    if (this.config.extrapolate && first !== undefined && previousSync > 0 && syncedAt > previousSync) {
      // The fleet's state and this process's differ by what the others admitted and what this
      // process assumed they did: both hold every unit admitted here, applied the same way. Used
      // counts compared as the model reads them at one time, not units summed, so that units a
      // window has stopped counting or a bucket has refilled read as none in both. Both full,
      // they tell nothing new and what was assumed stands: under the load of
      // test/tests/hybrid-bound.test.ts, comparing units past the limit too let a sliding window
      // over-admit 43 units a window on average, against 25 so.
      const assumed = slots.others.get(slot)?.assumed ?? 0
      const local = usedOf(model, slots.stateOf(slot, comparedAt), first, comparedAt)
      const others = usedOf(model, state, first, comparedAt) - local + assumed
      const perMs = Math.max(0, others) / (syncedAt - previousSync)
      if (perMs > 0) slots.others.set(slot, { perMs, assumed: 0 })
      else slots.others.delete(slot)
    }
    slots.setState(slot, state, state === undefined ? 0 : model.expiresAt(state, windows))
    slots.setSyncedAt(slot, syncedAt)
  }

  /** A sync that reached Redis for every chunk: the store is synced again. */
  private synced(report: SyncReport): void {
    this.redisFailing = false
    this.lastGoodSyncAt = this.safeNow()
    if (this.degradedNoticed) {
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
    const { slots } = this
    slots.sweep(SWEEP_PER_SYNC, (slot) => !slots.listed(slot) && !slots.unsynced(slot) && slots.expiresAt(slot) <= now)
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
    if (this.exchange && this.book) {
      report.leaseRoundTrips = this.exchange.roundTrips - this.roundTripsReported
      this.roundTripsReported = this.exchange.roundTrips
      report.reservedUnits = this.book.reservedUnits()
    }
    this.emit('sync', report)
    return report
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
