import { describeValue, TollgateError } from '../errors.js'
import { groupBySlot } from './cluster-slots.js'
import type { Lease, LeaseBook } from './hybrid-lease-book.js'
import { ruleTextOf, type SyncCommand } from './hybrid-sync.js'
import type { StoreRequest, StoreResult, StoreWindowResult } from './store.js'

/** What the lease exchange needs of its HybridStore. */
export interface LeaseContext {
  readonly book: LeaseBook
  readonly run: SyncCommand
  readonly cluster: boolean
  /** The call's time for the script: ms, or '-' for the server's TIME. */
  timeOf(now: number): string
  /** Live processes, as the last heartbeat counted them. */
  instances(): number
  /** The server answered a call sent at `sentAt` (monotonic ms): `serverMs` is its time. */
  answered(serverMs: number, sentAt: number): void
}

/** What one chunk of a strict sync answers (the same shape as an approximate sync's). */
export interface LeaseChunkOutcome {
  overAdmitted: number
  instances: number | undefined
  keyError?: TollgateError
}

/**
 * Strict mode's exchanges with lua/lease.lua: the round trip of a decision its slices do not
 * cover, and the sync that gives unused units back and tops slices up.
 */
export class LeaseExchange {
  /** Decisions that waited on Redis. */
  roundTrips = 0

  constructor(private readonly context: LeaseContext) {}

  /**
   * Decides the request in Redis as a RedisStore would, the process's own slices of its keys
   * given back first, and refills them in the same call. On a Cluster, the keys' slots are
   * decided one after another in ascending order; a refusal gives back what the earlier ones
   * charged, as a RedisStore's consume does.
   */
  async decide(request: StoreRequest, leases: readonly Lease[], now: number): Promise<StoreResult> {
    const { book, cluster } = this.context
    const { cost } = request
    this.roundTrips++
    const time = this.context.timeOf(now)
    const taken = leases.map((lease) => {
      const given = lease.given
      if (lease.slice > 0) given.push(lease.sliceAt, -lease.slice)
      lease.slice = 0
      lease.given = []
      lease.inFlight++
      return given
    })
    const wants = leases.map((lease) => book.sliceSize(lease, cost))
    const groups = cluster ? groupBySlot(leases.map((lease) => lease.key)) : [leases.map((_, i) => i)]
    const answers: Array<StoreWindowResult[] | undefined> = new Array(leases.length)
    const charged: Array<{ indices: number[]; at: number }> = []
    let allowed = true
    let nowMs = now
    try {
      for (const group of groups) {
        const keys = group.map((i) => (leases[i] as Lease).key)
        const entries = group.map((i) => entryOf(leases[i] as Lease, wants[i] as number, taken[i] as number[]))
        const reply = await this.call(keys, String(cost), time, undefined, entries)
        for (const i of group) taken[i] = []
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
      // Units not delivered are given back at the next sync.
      leases.forEach((lease, i) => {
        for (let s = 0; s < (taken[i] as number[]).length; s += 2) {
          book.give(lease, (taken[i] as number[])[s] as number, -((taken[i] as number[])[s + 1] as number))
        }
      })
      if (charged.length > 0) this.giveBackCharges(leases, charged, cost)
      throw error
    } finally {
      for (const lease of leases) lease.inFlight--
    }
    if (!allowed && charged.length > 0) await this.undo(leases, charged, cost, time)
    if (allowed) {
      for (const lease of leases) {
        lease.admitted += cost
        book.listed.add(lease)
      }
    }
    const windows: StoreWindowResult[] = []
    leases.forEach((lease, i) => {
      const answered = answers[i]
      if (answered !== undefined) windows.push(...answered)
      else for (const window of lease.target.windows) windows.push(lease.model.answer(lease.state, window, nowMs, cost))
    })
    return { allowed, nowMs, windows }
  }

  /**
   * One chunk of a sync: each lease gives back what it holds beyond its new size and what its
   * ended windows left, and asks for what its slice lacks. Answers are applied whenever they
   * come; units Redis did not take are given back at the next sync.
   */
  async syncChunk(
    leases: readonly Lease[],
    keys: readonly string[],
    now: number,
    margin: number,
    heartbeat: readonly [string, string] | undefined,
    closing: boolean,
  ): Promise<LeaseChunkOutcome | Error> {
    const { book } = this.context
    const time = this.context.timeOf(now)
    const sending: number[][] = []
    const entries: string[] = []
    for (const lease of leases) {
      book.expire(lease, now, margin)
      const size = book.resize(lease, now, closing)
      sending.push(lease.given)
      entries.push(entryOf(lease, Math.max(0, size - lease.slice), lease.given))
      lease.given = []
      lease.inFlight++
    }
    let reply: LeaseReply
    try {
      reply = await this.call(keys, '-', time, heartbeat, entries)
    } catch (error) {
      leases.forEach((lease, i) => {
        lease.given = (sending[i] as number[]).concat(lease.given)
        if (lease.given.length > 0) book.listed.add(lease)
      })
      return error instanceof Error ? error : new Error(String(error))
    } finally {
      for (const lease of leases) lease.inFlight--
    }
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
    cost: number,
    time: string,
  ): Promise<void> {
    for (const { indices, at } of charged) {
      const keys = indices.map((i) => (leases[i] as Lease).key)
      const entries = indices.map((i) => entryOf(leases[i] as Lease, 0, [at, -cost]))
      try {
        await this.call(keys, '-', time, undefined, entries)
      } catch {
        for (const i of indices) this.context.book.give(leases[i] as Lease, at, cost)
      }
    }
  }

  private giveBackCharges(
    leases: readonly Lease[],
    charged: ReadonlyArray<{ indices: number[]; at: number }>,
    cost: number,
  ): void {
    for (const { indices, at } of charged) for (const i of indices) this.context.book.give(leases[i] as Lease, at, cost)
  }

  private async call(
    keys: readonly string[],
    cost: string,
    time: string,
    heartbeat: readonly [string, string] | undefined,
    entries: readonly string[],
  ): Promise<LeaseReply> {
    const allKeys = heartbeat ? [heartbeat[0], ...keys] : [...keys]
    const sentAt = performance.now()
    const raw = await this.context.run(
      allKeys.length,
      ...allKeys,
      time,
      cost,
      heartbeat ? heartbeat[1] : '',
      ...entries,
    )
    const reply = readLeaseReply(raw, entries, cost !== '-')
    this.context.answered(reply.serverMs, sentAt)
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

/** A lease's entry in the script's ARGV: its rule, the units it asks for, the units it gives back. */
function entryOf(lease: Lease, want: number, given: readonly number[]): string {
  const { algorithm, windows } = lease.target
  return `${ruleTextOf(algorithm, windows)}|${want}|${given.join(' ')}`
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
          // The script answered for the cost plus the units reserved: those are this process's to admit.
          remaining: Number(remaining) + reserved,
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
