import { isRedirectedToTheEnd } from '../../redis-clients/reply-errors.js'
import { TollgateError } from '../../support/errors.js'
import { operationKeyBeside, resendAsItWas } from '../shared/operations.js'
import { decodeCounterState, toModelState } from '../shared/redis-state.js'
import { pendingUnits } from './bucket-fold.js'
import type { KeyTable, Shape } from './key-table.js'
import type { SyncBatch } from './mode.js'
import type { HybridConfig } from './options.js'
import { PushedAlone } from './pushed-alone.js'
import type { RedisLink } from './redis-link.js'
import type { RowList } from './row-list.js'
import { usedOf, withUnits } from './segments.js'
import { type ChunkAnswer, type ChunkOutcome, chunkArguments, pushEntries, readChunkReply } from './sync-wire.js'

/** Expired keys the sync looks at per run to drop them, beside pushing: the sweep goes round in slices. */
const SWEEP_PER_SYNC = 10_000

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

/**
 * Approximate mode's side of a sync: the listed keys' units pushed to Redis (`lua/sync.lua`) and
 * the fleet's totals taken back into the key table, each push applied exactly once however often
 * it is sent.
 */
export class ApproximateSync {
  /** Units this process pushed above a window's limit, by rule. */
  readonly overAdmittedByRule = new Map<string, number>()
  /** Keys forgotten with units that never reached Redis. */
  evictedUnsynced = 0
  /** Units pushed outside a sync: under a key's earlier limits, or of a key forgotten to make room. */
  private readonly alone: PushedAlone
  /** Pushes whose calls failed, their units still `sending`: sent again as they were at the next sync. */
  private readonly doubtful: DoubtfulPush[] = []
  /**
   * Set when a call met a slot its master no longer serves (the client's map of the Cluster is
   * out of date): the next sync's calls each hold one slot, which the client routes by Redis's
   * redirections, learning the new map.
   */
  private slotBySlot = false

  constructor(
    private readonly link: RedisLink,
    private readonly config: HybridConfig,
    private readonly rows: KeyTable,
    private readonly listed: RowList,
  ) {
    this.alone = new PushedAlone(config.maxTrackedKeys, {
      send: (keyCount, keysAndArgs) => link.sent(keyCount, keysAndArgs),
      operationKey: (key) => operationKeyBeside(config.prefix, key),
      putBack: (row, generation, units) => {
        if (!rows.holds(row, generation)) {
          this.evictedUnsynced++
          return
        }
        rows.units.putBack(row, units, rows.shape(row))
        if (rows.list(row)) listed.push(row)
      },
      overAdmitted: (rule, units) => this.overAdmitted(rule, units),
    })
  }

  /** The listed keys, their units moved to `sending`; a key whose last push is still under way waits for the next sync. */
  batch(time: string): SyncBatch {
    const { rows } = this
    const batch: number[] = []
    this.listed.filter((row) => {
      if (!rows.listed(row)) return false
      if (rows.units.isSending(row)) return true
      rows.unlist(row)
      rows.units.startSending(row)
      batch.push(row)
      return false
    })
    let pushedUnits = 0
    for (const row of batch) pushedUnits += this.sendingUnitsOf(row)
    const slotsPerCall = this.slotBySlot ? 'slot' : 'master'
    this.slotBySlot = false
    return {
      size: batch.length,
      pushedUnits,
      nameOf: (at) => rows.key(batch[at] as number),
      slotOf: (at) => rows.slot(batch[at] as number),
      slotsPerCall,
      send: (indices, keys, heartbeat, slotRuns) =>
        this.sendChunk(
          indices.map((at) => batch[at] as number),
          keys,
          time,
          heartbeat,
          slotRuns,
        ),
      resend: () => {
        this.alone.resendDoubtful()
        return this.doubtful.splice(0).map((push) => {
          let units = 0
          for (const row of push.chunk) units += this.sendingUnitsOf(row)
          return { key: push.keysAndArgs[0] as string, outcome: this.sendPush(push), pushedUnits: units }
        })
      },
      aside: () => this.alone.takeCounts(),
    }
  }

  /** Units pushed at once, alone, under the shape they were admitted under (`pushed-alone.ts`). */
  pushAlone(row: number, shape: Shape, units: readonly number[]): void {
    const { rows } = this
    this.alone.push(row, rows.generation(row), rows.key(row), shape, units, this.link.timeArg())
  }

  /**
   * The fleet's state after the push becomes this key's, with the units admitted here while the
   * sync was under way charged again on top. With `extrapolate`, the units the others admitted
   * since the key's last sync set the rate they are assumed to go on at: the fleet's state and
   * this process's are read at `comparedAt`, no earlier than the sync or any unit admitted here.
   */
  apply(row: number, after: string, syncedAt: number, comparedAt: number): void {
    const { rows } = this
    const { algorithm, windows, model } = rows.shape(row)
    rows.units.endSending(row)
    const pending = rows.units.pendingOf(row)
    const baseline = toModelState(algorithm, windows, decodeCounterState(algorithm, windows, after || null), true)
    const state = withUnits(model, windows, baseline, pending)
    const previousSync = rows.syncedAt(row)
    const first = windows[0]
    if (this.config.extrapolate && first !== undefined && previousSync > 0 && syncedAt > previousSync) {
      // The fleet's state and this process's differ by what the others admitted and what this
      // process assumed they did: both hold every unit admitted here, applied the same way. Used
      // counts compared as the model reads them at one time, not units summed, so that units a
      // window has stopped counting or a bucket has refilled read as none in both. Both full,
      // they tell nothing new and what was assumed stands: comparing units past the limit too let
      // a sliding window over-admit more under the load of test/tests/hybrid-bound.test.ts.
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

  /** Drops keys whose state expired and that hold nothing to push, a slice at a time. */
  sweep(now: number): void {
    const { rows } = this
    rows.sweep(SWEEP_PER_SYNC, (row) => !rows.listed(row) && !rows.units.unsynced(row) && rows.expiresAt(row) <= now)
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
    slotRuns: readonly number[],
  ): Promise<ChunkOutcome | Error> {
    const { rows } = this
    // A row may be given to another key before the answer comes: the answer is the key's.
    const generations = chunk.map((row) => rows.generation(row))
    // Only a push needs one: a chunk that only reads writes nothing that could count twice.
    const pushes = chunk.some((row) => rows.units.isSending(row))
    const operationKey = pushes ? operationKeyBeside(this.config.prefix, keys[0] as string) : undefined
    const { keyCount, keysAndArgs } = chunkArguments(
      pushEntries(rows, chunk),
      keys,
      time,
      heartbeat,
      operationKey,
      slotRuns,
    )
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
      answer = readChunkReply(await this.link.sent(push.keyCount, push.keysAndArgs), keys)
    } catch (error) {
      // Redis answering with an error ran nothing (OOM, say): no doubt, the units go back.
      if (chunk.length > 0 && resendAsItWas(error, push.since)) this.doubtful.push(push)
      else for (const [i, row] of chunk.entries()) this.requeue(row, generations[i] as number)
      const failure = error instanceof Error ? error : new Error(String(error))
      if (isRedirectedToTheEnd(failure)) {
        // A slot being migrated: the push waits for it, and the node, answering, is not failing.
        const refused = new TollgateError('TG_STORE', `the sync failed: ${failure.message}`, {
          storeDown: false,
          cause: failure,
        })
        return { overAdmitted: 0, instances: undefined, refused }
      }
      return failure
    }
    this.link.aligned?.measured(answer.serverMs, sentAt, performance.now())
    const syncedAt = time === '-' ? answer.serverMs : Number(time)
    // Not before any unit admitted here: a clock a few ms ahead of Redis's stamps units after
    // the sync's time, which Redis moves back to it (lua/lib/counter_state.lua, lua/lib/bucket.lua).
    const comparedAt = Math.max(syncedAt, this.link.safeNow())
    let overAdmitted = 0
    let keyError: TollgateError | undefined
    chunk.forEach((row, i) => {
      const value = answer.values[i]
      if (value === undefined || !rows.holds(row, generations[i] as number)) return
      if (value instanceof TollgateError) {
        // A key Redis cannot hold these units in (another type) would fail every sync: dropped.
        rows.units.endSending(row)
        keyError ??= value
        return
      }
      if (typeof value !== 'string') {
        // A key the node does not serve, a map out of date rather than a failure: its units go
        // again at the next sync, slot by slot, which follows Redis's redirections; pushed already
        // (the call sent again after a lost reply), only its totals are not known here yet.
        this.slotBySlot = true
        if (value.pushed) rows.units.endSending(row)
        else this.requeue(row, generations[i] as number)
        return
      }
      const over = answer.overAdmitted?.get(i) ?? 0
      if (over > 0) {
        overAdmitted += over
        this.overAdmitted(rows.shape(row).rule, over)
      }
      this.apply(row, value, syncedAt, comparedAt)
    })
    return keyError
      ? { overAdmitted, instances: answer.instances, keyError }
      : { overAdmitted, instances: answer.instances }
  }

  /** The units a key's push under way carries, summed (0 for none). */
  private sendingUnitsOf(row: number): number {
    const { rows } = this
    return rows.units.sendsOneSegment(row) ? rows.units.sendingUnitsOf(row) : pendingUnits(rows.units.sendingOf(row))
  }

  private overAdmitted(rule: string, units: number): void {
    this.overAdmittedByRule.set(rule, (this.overAdmittedByRule.get(rule) ?? 0) + units)
  }

  /** Puts a failed push's units back before those admitted since, for the next sync. */
  private requeue(row: number, generation: number): void {
    const { rows } = this
    if (!rows.holds(row, generation)) return
    const sending = rows.units.endSending(row)
    if (sending !== undefined) rows.units.putBack(row, sending, rows.shape(row))
    if (rows.list(row)) this.listed.push(row)
  }
}
