import calculateSlot from 'cluster-key-slot'
import type { Decision } from '../../rules/decision.js'
import type { AlgorithmName, Window } from '../../rules/rules.js'
import { TollgateError } from '../../support/errors.js'
import type { TargetSlot } from '../shared/decision-targets.js'
import { ALLOWED, decideLocally, evaluateLocally } from '../shared/evaluate-locally.js'
import { type LocalCall, localDecisionOf } from '../shared/local-decision.js'
import type { CounterAlgorithm } from '../shared/redis-state.js'
import type {
  StoreOperation,
  StoreReceiver,
  StoreRequest,
  StoreResult,
  StoreTarget,
  StoreWindowResult,
} from '../store.js'
import { ApproximateSync } from './approximate-sync.js'
import { KeyTable, type Shape } from './key-table.js'
import type { HybridMode, ModeCounts, SyncBatch } from './mode.js'
import type { HybridConfig } from './options.js'
import type { Outage } from './outage.js'
import type { RedisLink } from './redis-link.js'
import { RowList } from './row-list.js'
import { record } from './segments.js'
import { chunkArguments, chunksOf, rangesOf, readChunkReply, SyncEntries } from './sync-wire.js'

/**
 * Syncs a decision on a key the table has no room for waits through, each pushing what the rows
 * hold, before a key with units not yet pushed is forgotten anyway (`evictedUnsynced`).
 */
const ROOM_ATTEMPTS = 5

type Totals = { after: string; syncedAt: number }

/**
 * `consistency: 'approximate'` (the default): decisions in the process on the fleet's totals as
 * the last sync left them, with the units the other processes are assumed to have admitted since
 * charged on top (`extrapolate`). A key new to a full table is read from Redis first. The sync's
 * side is `approximate-sync.ts`.
 */
export class ApproximateMode implements HybridMode {
  readonly algorithms: readonly AlgorithmName[] = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra']
  private readonly rows: KeyTable
  /** Rows of the keys the next sync pushes or pulls. */
  private readonly listed: RowList
  private readonly pushes: ApproximateSync
  /** Each decision's rows, in target order, reused by every decision rather than allocated for each. */
  private tracked: number[] = []
  /** Each one-pass decision's answers, one per window, reused as `tracked` is: the decision copies them out. */
  private readonly answers: StoreWindowResult[] = []
  /** The sync decisions waiting for a free row wait on: one at a time, however many wait. */
  private roomSync: Promise<unknown> | undefined

  constructor(
    private readonly link: RedisLink,
    private readonly outage: Outage,
    private readonly config: HybridConfig,
    /** Runs a sync (the store's, one at a time), and whether the store closed. */
    private readonly store: { syncNow(): Promise<{ error?: TollgateError }>; closed(): boolean },
  ) {
    this.rows = new KeyTable(config.maxTrackedKeys, link.keys)
    this.listed = new RowList(config.maxTrackedKeys)
    this.pushes = new ApproximateSync(link, config, this.rows, this.listed)
  }

  /**
   * In the process, on the last synced totals; undefined when a key is new to a full table,
   * which `ask` decides. `forgetAny`: a new key takes the row of one with units not yet pushed if
   * it must.
   */
  decide(request: StoreRequest, forgetAny = false): StoreResult | undefined {
    const now = this.link.now()
    const { operation, targets, cost } = request
    const count = targets.length
    if (!forgetAny && this.lacksRoom(targets, count) && !this.link.failingFor(targets)) return undefined
    const degraded = this.outage.applies(targets, now)
    const { rows } = this
    const tracked = this.trackAll(targets, count, now)
    let result: StoreResult
    if (degraded && operation !== 'refund') {
      const keys: string[] = new Array(count)
      for (let t = 0; t < count; t++) keys[t] = rows.key(tracked[t] as number)
      result = this.outage.answer(keys, request, now)
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
    this.recordUnits(operation, cost, result.allowed, count, now)
    return result
  }

  /**
   * `decide` in one pass, from a limiter's targets to its Decision, while every Redis node answers
   * and the table has room; undefined otherwise, for `decide` to take the request.
   */
  decideInProcess(call: LocalCall, targets: readonly TargetSlot[], count: number): Decision | undefined {
    // No outage applies, and no key waits on a failing node, while no node is failing.
    if (this.link.health.failing) return undefined
    const now = this.link.now()
    if (this.lacksRoom(targets, count)) return undefined
    const tracked = this.trackAll(targets, count, now)
    const { answers } = this
    const bits = decideLocally(this.rows.table, tracked, call, targets, count, now, answers)
    this.recordUnits(call.operation, call.cost, bits === ALLOWED, count, now)
    return localDecisionOf(call, targets, count, bits, now, answers)
  }

  /** The rows of the first `count` targets, made for new keys, in target order. */
  private trackAll(targets: readonly StoreTarget[], count: number, now: number): number[] {
    let { tracked } = this
    if (tracked.length < count) {
      tracked = new Array(count)
      this.tracked = tracked
    }
    for (let t = 0; t < count; t++) tracked[t] = this.track(targets[t] as StoreTarget, now)
    return tracked
  }

  /** Records on each of a decision's tracked rows the units it charged or refunded, for the next sync to push. */
  private recordUnits(operation: StoreOperation, cost: number, allowed: boolean, count: number, now: number): void {
    const units = operation === 'refund' ? -cost : operation === 'consume' && allowed ? cost : 0
    if (units === 0) return
    const { rows, tracked } = this
    for (let t = 0; t < count; t++) {
      const row = tracked[t] as number
      record(rows, row, rows.shape(row), now, units)
      rows.markUsed(row)
      if (rows.list(row)) this.listed.push(row)
    }
  }

  /**
   * A decision on keys new to a full table. Such a key may be one the process forgot to make
   * room: decided from empty, it would be admitted its limit again at every return, however often
   * the process had synced it. So its totals are read from Redis first (one round trip, the sync
   * script pushing nothing), and it takes the row of a key with nothing to push, or else of one
   * whose units then go to Redis in a push of their own; when every row looked at has a push
   * under way, it waits for that sync.
   */
  async ask(request: StoreRequest, asker?: StoreReceiver): Promise<StoreResult> {
    try {
      for (let attempt = 0; attempt < ROOM_ATTEMPTS && !this.link.failingFor(request.targets); attempt++) {
        if (this.store.closed()) break
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

  forget(target: StoreTarget): void {
    const row = this.rows.find(target.rule, target.identifier)
    if (row >= 0) this.rows.remove(row)
  }

  batch(_now: number, time: string): SyncBatch {
    return this.pushes.batch(time)
  }

  synced(now: number): void {
    this.pushes.sweep(now)
  }

  close(): void {}

  unsent(): boolean {
    return this.rows.units.pendingKeys > 0
  }

  counts(): ModeCounts {
    return {
      trackedKeys: this.rows.size,
      dirtyKeys: this.rows.units.unsyncedCount,
      evictedUnsynced: this.pushes.evictedUnsynced,
      leaseRoundTrips: 0,
      reservedUnits: 0,
      overAdmittedByRule: this.pushes.overAdmittedByRule,
      leaseRoundTripsByRule: NONE,
    }
  }

  /** Whether a target is new to a table with no free row for it (one forgotten may come back). */
  private lacksRoom(targets: readonly StoreTarget[], count: number): boolean {
    const { rows } = this
    if (rows.size + count <= this.config.maxTrackedKeys) return false
    let fresh = 0
    for (let t = 0; t < count; t++) {
      const target = targets[t] as StoreTarget
      if (rows.find(target.rule, target.identifier) < 0) fresh++
    }
    return fresh > 0 && rows.size + fresh > this.config.maxTrackedKeys
  }

  /** The fleet's totals of these keys, read by the sync script: a chunk per Cluster slot. */
  private async readTotals(targets: readonly StoreTarget[], asker: StoreReceiver | undefined): Promise<Totals[]> {
    const { link } = this
    const names = targets.map((target) => link.keyOf(target))
    const time = link.timeArg()
    const totals: Totals[] = new Array(targets.length)
    try {
      await Promise.all(
        (link.cluster
          ? chunksOf(names.length, (at) => calculateSlot(names[at] as string))
          : rangesOf(names.length)
        ).map(async ({ indices }) => {
          const keys = indices.map((at) => names[at] as string)
          const entries = new SyncEntries()
          for (const at of indices) {
            const target = targets[at] as StoreTarget
            entries.add(target.algorithm, target.windows, undefined)
          }
          const { keyCount, keysAndArgs } = chunkArguments(entries.entries, keys, time, undefined, undefined)
          const sentAt = performance.now()
          const answer = readChunkReply(await link.sent(keyCount, keysAndArgs, asker), keys)
          link.aligned?.measured(answer.serverMs, sentAt, performance.now())
          const syncedAt = time === '-' ? answer.serverMs : Number(time)
          indices.forEach((at, i) => {
            const value = answer.values[i]
            if (value instanceof TollgateError) throw value
            if (typeof value !== 'string') {
              throw new TollgateError('TG_STORE', `the node asked does not serve ${keys[i]}: its slot moved`)
            }
            totals[at] = { after: value, syncedAt }
          })
        }),
      )
    } catch (error) {
      throw link.failed(targets, "reading a key's totals", error)
    }
    link.heardFrom(targets, link.safeNow())
    return totals
  }

  /**
   * Gives each of `fresh` a row holding the totals Redis told, making room by forgetting keys
   * with nothing to push; false when the rows looked at all held units not yet pushed.
   */
  private adopt(targets: readonly StoreTarget[], fresh: readonly StoreTarget[], totals: readonly Totals[]): boolean {
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
    const now = this.link.safeNow()
    fresh.forEach((target, i) => {
      // Another decision's read may have adopted it meanwhile, with totals as recent.
      if (rows.find(target.rule, target.identifier) >= 0) return
      const { after, syncedAt } = totals[i] as Totals
      const shape = rows.shapeOf(target.rule, target.algorithm as CounterAlgorithm, target.windows)
      const row = rows.add(target.identifier, shape)
      rows.markUsed(row)
      this.pushes.apply(row, after, syncedAt, Math.max(syncedAt, now))
    })
    return true
  }

  /** A sync for decisions waiting on a free row: joined, not queued again, by those that come while it runs. */
  private syncForRoom(fresh: readonly StoreTarget[], asker: StoreReceiver | undefined): Promise<{ error?: unknown }> {
    let sync = this.roomSync as Promise<{ error?: unknown }> | undefined
    if (sync === undefined) {
      const started = this.store.syncNow()
      sync = started
      this.roomSync = started
      void started.finally(() => {
        if (this.roomSync === started) this.roomSync = undefined
      })
    }
    // Bounded by the connection's silence while the sync's calls are out, not by the wait.
    const first = fresh[0]
    if (first !== undefined) asker?.sent?.(this.link.watchOf(this.link.keyOf(first)))
    return sync
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
    if (!rows.units.hasPending(row) || sameLimits(before.windows, shape.windows)) return
    this.pushes.pushAlone(row, before, rows.units.takePending(row) as number[])
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
    if ((this.link.health.failing || !rows.evictPushing(this.pushForgotten)) && rows.evictAny()) {
      this.pushes.evictedUnsynced++
    }
    return rows.add(identifier, shape)
  }

  /** A key forgotten to make room: its units not yet pushed go to Redis at once, alone. */
  private readonly pushForgotten = (row: number, units: number[]): void => {
    this.pushes.pushAlone(row, this.rows.shape(row), units)
  }

  /**
   * Charges the units the other processes are assumed to have admitted since the key's last
   * sync (extrapolation), as far as they have not been charged yet.
   */
  private assumeOthers(row: number, now: number): void {
    const { rows } = this
    const others = rows.others.get(row)
    if (others === undefined) return
    const due = Math.floor(others.perMs * (now - rows.syncedAt(row))) - others.assumed
    if (due <= 0) return
    const { model, windows } = rows.shape(row)
    const state = model.charge(rows.stateOf(row, now), windows, now, due)
    rows.setState(row, state, model.expiresAt(state, windows))
    others.assumed += due
  }
}

/** Whether two lists of windows hold the same limits, window by window. */
function sameLimits(a: readonly Window[], b: readonly Window[]): boolean {
  return a.length === b.length && a.every((window, i) => window.limit === b[i]?.limit)
}

const NONE: ReadonlyMap<string, number> = new Map()
