import calculateSlot from 'cluster-key-slot'
import { describeValue, TollgateError } from '../../support/errors.js'
import { groupBySlot } from '../shared/cluster-slots.js'
import { resendAsItWas } from '../shared/operations.js'
import type { ReplyWatches } from '../shared/reply-watch.js'
import type { StoreReceiver, StoreRequest, StoreResult, StoreWindowResult } from '../store.js'
import type { Lease, LeaseBook } from './lease-book.js'
import { type ChunkOutcome, ruleTextOf, type SyncCommand } from './sync-wire.js'

/** What the lease exchange needs of its HybridStore. */
export interface LeaseContext {
  readonly book: LeaseBook
  readonly run: SyncCommand
  readonly cluster: boolean
  /** Whether Redis answers the calls: a decision waiting on a round trip is bounded by its connection's silence. */
  readonly watches: ReplyWatches
  /** The call's time for the script: ms, or '-' for the server's TIME. */
  timeOf(now: number): string
  /** A new operation's key in the slot of `key` (lua/lib/operation.lua). */
  operationKey(key: string): string
  /** Live processes, as the last heartbeat counted them. */
  instances(): number
  /** This process's id, under which a key records the units it holds (lua/lease.lua). */
  readonly instance: string
  /** The server answered a call sent at `sentAt` (monotonic ms) on `key`'s node: `serverMs` is its time. */
  answered(serverMs: number, sentAt: number, key: string): void
}

/**
 * Strict mode's exchanges with lua/lease.lua: the round trip of a decision its slices do not
 * cover, and the sync that gives unused units back and tops slices up.
 */
export class LeaseExchange {
  /** Decisions that waited on Redis. */
  roundTrips = 0
  /** Chunks whose calls failed without Redis's answer: sent again as they were at the next sync. */
  private readonly doubtful: LeaseChunk[] = []
  /** The same, by the rule of each decision's first key. */
  readonly roundTripsByRule = new Map<string, number>()

  constructor(private readonly context: LeaseContext) {}

  /**
   * Decides the request in Redis as a RedisStore would, on the units its slices do not cover,
   * and refills them in the same call. What each slice holds toward the cost is set aside
   * meanwhile, so that decisions made beside it neither count it twice nor lose it. On a
   * Cluster, the keys' slots are decided one after another in ascending order; a refusal gives
   * back what the earlier ones charged, as a RedisStore's consume does. `asker` is told each
   * time the decision goes on the wire.
   */
  async decide(
    request: StoreRequest,
    leases: readonly Lease[],
    now: number,
    asker?: StoreReceiver,
  ): Promise<StoreResult> {
    const { book, cluster } = this.context
    const { cost } = request
    this.roundTrips++
    const rule = request.targets[0]?.rule
    if (rule !== undefined) this.roundTripsByRule.set(rule, (this.roundTripsByRule.get(rule) ?? 0) + 1)
    const time = this.context.timeOf(now)
    // One round trip under way on a key refills its slice to its size: those beside it ask only
    // for headroom on their own cost, or a burst of them would each reserve a whole slice.
    const wants = leases.map((lease) => book.sliceSize(lease, cost, lease.inFlight > 0))
    const held = leases.map((lease) => {
      const units = Math.min(lease.slice, cost)
      lease.slice -= units
      lease.inFlight++
      return { units, at: lease.sliceAt }
    })
    const groups = cluster ? groupBySlot(leases.map((lease) => lease.key)) : [leases.map((_, i) => i)]
    const answers: Array<StoreWindowResult[] | undefined> = new Array(leases.length)
    const charged: Array<{ indices: number[]; at: number }> = []
    let allowed = true
    let nowMs = now
    try {
      for (const group of groups) {
        const keys = group.map((i) => (leases[i] as Lease).key)
        // Units to give back wait for the sync, whose pushes are sent again as they were when a
        // call fails: a decision that fails is not sent again, so what it carried could be lost
        // or, put back, given twice.
        const entries = group.map((i) =>
          entryOf(leases[i] as Lease, wants[i] as number, cost - (held[i] as Held).units, []),
        )
        const reply = await this.call(keys, 'decide', time, undefined, entries, asker, this.operationKeyOf(keys))
        const at = time === '-' ? reply.serverMs : now
        nowMs = at
        group.forEach((i, j) => {
          const lease = leases[i] as Lease
          const entry = reply.entries[j] as EntryAnswer
          book.grant(lease, entry.reserved, at)
          book.saw(lease, entry.value, at, this.context.instances())
          answers[i] = entry.windows
        })
        if (!reply.allowed) {
          allowed = false
          break
        }
        charged.push({ indices: group, at })
      }
    } catch (error) {
      // Those set aside go back to the slices.
      this.restore(leases, held)
      if (charged.length > 0) this.giveBackCharges(leases, charged, held, cost)
      throw error
    } finally {
      for (const lease of leases) lease.inFlight--
    }
    if (!allowed) {
      this.restore(leases, held)
      if (charged.length > 0) await this.undo(leases, charged, held, cost, time, asker)
    } else {
      for (const lease of leases) {
        lease.admitted += cost
        book.listed.add(lease)
      }
    }
    const windows: StoreWindowResult[] = []
    leases.forEach((lease, i) => {
      const answered = answers[i]
      if (answered === undefined) {
        for (const window of lease.target.windows) windows.push(lease.model.answer(lease.state, window, nowMs, cost))
        return
      }
      // Redis counts this process's slice as used; the slice is this process's to admit.
      for (const window of answered) windows.push({ ...window, remaining: window.remaining + lease.slice })
    })
    return { allowed, nowMs, windows }
  }

  /** Units set aside toward a decision that was not made, back to their slices. */
  private operationKeyOf(keys: readonly string[]): string {
    return this.context.operationKey(keys[0] as string)
  }

  private restore(leases: readonly Lease[], held: readonly Held[]): void {
    leases.forEach((lease, i) => {
      const { units, at } = held[i] as Held
      if (units > 0) this.context.book.grant(lease, units, at)
    })
  }

  /**
   * One chunk of a sync: each lease gives back what it holds beyond its new size and what its
   * ended windows left, and asks for what its slice lacks, under an operation's key that keeps
   * the reply, so that the chunk sent again (by ioredis after a lost reply, or by the next sync
   * after a failed call) gives back and reserves once, and answers the same.
   */
  syncChunk(
    leases: readonly Lease[],
    keys: readonly string[],
    now: number,
    margin: number,
    heartbeat: readonly [string, string] | undefined,
    closing: boolean,
  ): Promise<ChunkOutcome | Error> {
    const { book } = this.context
    const time = this.context.timeOf(now)
    const sending: number[][] = []
    const entries: string[] = []
    for (const lease of leases) {
      book.expire(lease, now, margin)
      const size = book.resize(lease, now, closing)
      sending.push(lease.given)
      entries.push(entryOf(lease, Math.max(0, size - lease.slice), 0, lease.given))
      lease.given = []
      lease.inFlight++
    }
    const operationKey = keys.length > 0 ? this.operationKeyOf(keys) : undefined
    return this.sendChunk({
      leases,
      keys,
      time,
      now,
      heartbeat,
      entries,
      sending,
      operationKey,
      since: performance.now(),
    })
  }

  /** The chunks whose calls failed without Redis's answer, sent again as they were: each with its first key, which tells its node. */
  resendDoubtful(): Array<[key: string, outcome: Promise<ChunkOutcome | Error>]> {
    return this.doubtful.splice(0).map((chunk) => [chunk.keys[0] ?? chunk.heartbeat?.[0] ?? '', this.sendChunk(chunk)])
  }

  /**
   * Sends a chunk and applies its answer whenever it comes. A call Redis answered with an error
   * ran nothing: its units go back to be given back at the next sync. A call that failed without
   * an answer (a lost connection) may have run: it is sent again as it was, under the same key,
   * at the next sync, its leases held meanwhile; past the key's life, its units go back.
   */
  private async sendChunk(chunk: LeaseChunk): Promise<ChunkOutcome | Error> {
    const { book } = this.context
    const { leases, sending, time, now } = chunk
    let reply: LeaseReply
    try {
      reply = await this.call(chunk.keys, '-', time, chunk.heartbeat, chunk.entries, undefined, chunk.operationKey)
    } catch (error) {
      if (leases.length > 0 && resendAsItWas(error, chunk.since)) {
        this.doubtful.push(chunk)
      } else {
        leases.forEach((lease, i) => {
          lease.inFlight--
          lease.given = (sending[i] as number[]).concat(lease.given)
          if (lease.given.length > 0) book.listed.add(lease)
        })
      }
      return error instanceof Error ? error : new Error(String(error))
    }
    for (const lease of leases) lease.inFlight--
    const at = time === '-' ? reply.serverMs : now
    let keyError: TollgateError | undefined
    leases.forEach((lease, i) => {
      const entry = reply.entries[i] as EntryAnswer
      if (entry.value.startsWith('!')) {
        // A key Redis cannot hold units in (another type) would fail every sync: its units are dropped.
        keyError ??= new TollgateError('TG_STORE', `the store failed on ${lease.key}: ${entry.value.slice(1)}`, {
          storeDown: false,
        })
        return
      }
      book.grant(lease, entry.reserved, at)
      book.saw(lease, entry.value, at, this.context.instances())
      // A slice is looked at again at the next sync: to give back what an idle key holds.
      if (lease.slice > 0) book.listed.add(lease)
    })
    return keyError
      ? { overAdmitted: 0, instances: reply.instances, keyError }
      : { overAdmitted: 0, instances: reply.instances }
  }

  /** Gives back a refused decision's charges on the slots decided before the one that refused. */
  private async undo(
    leases: readonly Lease[],
    charged: ReadonlyArray<{ indices: number[]; at: number }>,
    held: readonly Held[],
    cost: number,
    time: string,
    asker: StoreReceiver | undefined,
  ): Promise<void> {
    for (const { indices, at } of charged) {
      const keys = indices.map((i) => (leases[i] as Lease).key)
      const entries = indices.map((i) => {
        const need = cost - (held[i] as Held).units
        return entryOf(leases[i] as Lease, 0, 0, need > 0 ? [at, -need] : [])
      })
      try {
        await this.call(keys, '-', time, undefined, entries, asker, this.operationKeyOf(keys))
      } catch {
        this.giveBackCharges(leases, [{ indices, at }], held, cost)
      }
    }
  }

  private giveBackCharges(
    leases: readonly Lease[],
    charged: ReadonlyArray<{ indices: number[]; at: number }>,
    held: readonly Held[],
    cost: number,
  ): void {
    for (const { indices, at } of charged) {
      for (const i of indices) this.context.book.give(leases[i] as Lease, at, cost - (held[i] as Held).units)
    }
  }

  private async call(
    keys: readonly string[],
    decision: 'decide' | '-',
    time: string,
    heartbeat: readonly [string, string] | undefined,
    entries: readonly string[],
    asker: StoreReceiver | undefined,
    operationKey: string | undefined,
  ): Promise<LeaseReply> {
    const allKeys: string[] = []
    if (heartbeat) allKeys.push(heartbeat[0])
    if (operationKey !== undefined) allKeys.push(operationKey)
    for (const key of keys) allKeys.push(key)
    const sentAt = performance.now()
    const { context } = this
    const watch = context.watches.of(context.cluster ? calculateSlot(allKeys[0] as string) : 0)
    const once = operationKey === undefined ? '' : '1'
    const sent = context.run(
      allKeys.length,
      ...allKeys,
      time,
      decision,
      heartbeat ? heartbeat[1] : '',
      once,
      context.instance,
      ...entries,
    )
    watch.sent()
    asker?.sent?.(watch)
    let raw: unknown
    try {
      raw = await sent
    } finally {
      watch.heard()
    }
    const reply = readLeaseReply(raw, entries, decision === 'decide')
    this.context.answered(reply.serverMs, sentAt, allKeys[0] as string)
    return reply
  }
}

interface EntryAnswer {
  reserved: number
  value: string
  windows: StoreWindowResult[] | undefined
}

interface LeaseReply {
  serverMs: number
  instances: number | undefined
  allowed: boolean
  entries: EntryAnswer[]
}

/** Units of a slice set aside toward a decision under way, and when they were reserved. */
interface Held {
  units: number
  at: number
}

/**
 * A lease's entry in the script's ARGV: its rule, the units it asks for, the units a decision
 * needs of Redis on it, the units it gives back.
 */
function entryOf(lease: Lease, want: number, need: number, given: readonly number[]): string {
  const { algorithm, windows } = lease.target
  return `${ruleTextOf(algorithm, windows)}|${want}|${need}|${given.join(' ')}`
}

function readLeaseReply(raw: unknown, entries: readonly string[], decides: boolean): LeaseReply {
  if (!Array.isArray(raw) || typeof raw[0] !== 'number') throw badReply(raw)
  const reply: LeaseReply = {
    serverMs: raw[0],
    instances: (raw[1] as number) >= 0 ? (raw[1] as number) : undefined,
    allowed: raw[2] === 1,
    entries: [],
  }
  let at = 3
  for (const entry of entries) {
    const reserved = Number(raw[at])
    const value = raw[at + 1]
    if (!Number.isFinite(reserved) || typeof value !== 'string') throw badReply(raw)
    at += 2
    let windows: StoreWindowResult[] | undefined
    if (decides) {
      windows = []
      const count = (entry.slice(0, entry.indexOf('|')).split(' ').length - 1) / 2
      for (let k = 0; k < count; k++, at += 3) {
        const remaining = raw[at] as number | string
        const fitsAt = raw[at + 2] as number
        windows.push({
          remaining: Number(remaining),
          resetAtMs: raw[at + 1] as number,
          fitsAtMs: fitsAt < 0 ? Number.POSITIVE_INFINITY : fitsAt,
        })
      }
    }
    reply.entries.push({ reserved, value, windows })
  }
  if (at !== raw.length) throw badReply(raw)
  return reply
}

function badReply(raw: unknown): TollgateError {
  return new TollgateError('TG_STORE', `unexpected reply from the lease script: ${describeValue(raw)}`)
}

/** A sync's chunk as it was sent. */
interface LeaseChunk {
  leases: readonly Lease[]
  keys: readonly string[]
  time: string
  now: number
  heartbeat: readonly [string, string] | undefined
  entries: readonly string[]
  /** Each lease's units given back in it. */
  sending: number[][]
  operationKey: string | undefined
  /** `performance.now()` when it was first sent. */
  since: number
}
