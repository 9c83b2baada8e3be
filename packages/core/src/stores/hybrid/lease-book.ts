import { type Algorithm, LIMITED, type Settled, SHEDS } from '../../algorithms/algorithm.js'
import { algorithms } from '../../algorithms/index.js'
import type { KeyBuilder } from '../../rules/keys.js'
import type { Window } from '../../rules/rules.js'
import { type CounterAlgorithm, decodeCounterState, toModelState } from '../shared/redis-state.js'
import type { StoreRequest, StoreResult, StoreTarget, StoreWindowResult } from '../store.js'

/**
 * Strict mode's bookkeeping: per key, the slice of its limits this process reserved in Redis
 * (units charged there in advance that only this process may admit), and what it must give back.
 *
 * Why a slice never over-admits: every unit a process admits was charged in Redis, by the script
 * that reserved it, in the window it is admitted in, and no other process can admit it. So each
 * window in Redis counts at least the units the fleet admitted in it, and Redis never lets a
 * count pass a limit. A slice is usable only until the first of its windows ends (less the clock's
 * uncertainty): a unit reserved in one window and admitted in the next would be counted in the
 * wrong one. What is left of it then is given back, stamped with the time it was reserved at, so
 * that it leaves the window it was charged to.
 */
export interface Lease {
  readonly key: string
  readonly target: StoreTarget
  readonly model: Algorithm<unknown>
  /** The fleet's use as this process last saw it (Redis's state, this process's unused slice taken out), plus what it admitted since. */
  state: unknown
  /** Units reserved in Redis and not admitted yet. */
  slice: number
  /** When the slice was reserved (one time within the windows it was charged to). */
  sliceAt: number
  /** When the first of the slice's windows ends. */
  sliceEndsAt: number
  /** Units to give back: `at, -units, …`, each at the time they were reserved at. */
  given: number[]
  /** Units admitted since the last sync: the rate the next slice is sized on. */
  admitted: number
  /** Units admitted per sync interval, as measured at the last sync. */
  perInterval: number
  /** The largest cost asked of the key: a slice smaller than one request never covers it. */
  largestCost: number
  /** When the last sync or round trip saw the key. */
  syncedAt: number
  /** Until then a decision its slice does not cover is refused here: Redis had no unreserved unit left. */
  exhaustedUntil: number
  /** Round trips and syncs under way that carry it: it is not evicted meanwhile. */
  inFlight: number
  /**
   * A key the book had no room for: decided in Redis at every decision, reserving nothing, and
   * kept by no one once its give-backs (refunds) are synced.
   */
  transient: boolean
}

/** Leases looked at, oldest first, for one to evict. */
const EVICTION_LOOK = 64

/** What a lease's `settle` leaves, reused by every decision: the state goes to the lease at once. */
const settled: Settled = { state: undefined, expiresAt: 0 }

/** What is left of a key's measured rate after an interval with fewer units. */
const DECAY = 0.75
/** A slice asked for below this many units: the key is idle, and holds nothing. */
const IDLE = 0.5

export interface LeaseSizing {
  readonly headroom: number
  readonly min: number
  readonly syncIntervalMs: number
}

export class LeaseBook {
  private readonly leases = new Map<string, Lease>()
  /** Leases the next sync carries: units to give back, a slice to top up, or a rate to measure. */
  readonly listed = new Set<Lease>()

  constructor(
    private readonly keys: KeyBuilder,
    private readonly maxKeys: number,
    private readonly sizing: LeaseSizing,
  ) {}

  get size(): number {
    return this.leases.size
  }

  /** Units reserved in Redis that this process holds. */
  reservedUnits(): number {
    let units = 0
    for (const lease of this.leases.values()) units += lease.slice
    return units
  }

  /** Keys with units to give back. */
  givingKeys(): number {
    let keys = 0
    for (const lease of this.leases.values()) if (lease.given.length > 0) keys++
    return keys
  }

  leaseOf(target: StoreTarget): Lease {
    const key = this.keys.key(target.rule, target.algorithm, target.identifier)
    let lease = this.leases.get(key)
    if (lease !== undefined && lease.target.windows !== target.windows) {
      // The rule changed: its slice was reserved for the old windows, so it goes back.
      this.expire(lease, Number.POSITIVE_INFINITY, 0)
      const replaced = this.fresh(key, target)
      replaced.given = lease.given
      this.leases.set(key, replaced)
      if (lease.given.length > 0) this.listed.add(replaced)
      this.listed.delete(lease)
      return replaced
    }
    if (lease === undefined) {
      if (this.leases.size >= this.maxKeys && !this.evictOne()) {
        const transient = this.fresh(key, target)
        transient.transient = true
        return transient
      }
      lease = this.fresh(key, target)
      this.leases.set(key, lease)
    }
    return lease
  }

  /** Drops the keys that hold nothing, owe nothing and whose state has expired. */
  sweep(now: number): void {
    for (const [key, lease] of this.leases) {
      if (lease.slice > 0 || lease.given.length > 0 || lease.inFlight > 0 || this.listed.has(lease)) continue
      if (lease.state === undefined || lease.model.expiresAt(lease.state, lease.target.windows) <= now) {
        this.leases.delete(key)
      }
    }
  }

  /** Every slice given back: the store closes. */
  giveAllBack(): void {
    for (const lease of this.leases.values()) this.expire(lease, Number.POSITIVE_INFINITY, 0)
  }

  /** Forgets the key: Redis forgot it too (reset), and with it every unit reserved there. */
  forget(target: StoreTarget): void {
    const key = this.keys.key(target.rule, target.algorithm, target.identifier)
    const lease = this.leases.get(key)
    if (lease === undefined) return
    this.leases.delete(key)
    this.listed.delete(lease)
  }

  /** The slice, if its first window ended (`margin` ms early), given back. */
  expire(lease: Lease, now: number, margin: number): void {
    if (lease.slice > 0 && now >= lease.sliceEndsAt - margin) {
      this.give(lease, lease.sliceAt, lease.slice)
      lease.slice = 0
    }
  }

  give(lease: Lease, at: number, units: number): void {
    if (units <= 0) return
    lease.given.push(at, -units)
    this.listed.add(lease)
  }

  /** Units Redis reserved for the key at `at`, added to its slice. */
  grant(lease: Lease, units: number, at: number): void {
    if (units <= 0) return
    const endsAt = endOf(lease.target.windows, at)
    if (lease.slice > 0 && lease.sliceEndsAt !== endsAt) {
      // Two slices of different windows cannot be told apart once added: the older goes back.
      if (lease.sliceEndsAt > endsAt) {
        this.give(lease, at, units)
        return
      }
      this.give(lease, lease.sliceAt, lease.slice)
      lease.slice = 0
    }
    if (lease.slice === 0) {
      lease.sliceAt = at
      lease.sliceEndsAt = endsAt
    }
    lease.slice += units
  }

  /**
   * What Redis holds for the key after a script call at `at` becomes what the process decides
   * on: its state less this process's unused slice, and whether no unit is left to reserve.
   */
  saw(lease: Lease, value: string, at: number, instances: number): void {
    const { algorithm, windows } = lease.target
    const full = toModelState(
      algorithm as CounterAlgorithm,
      windows,
      decodeCounterState(algorithm as CounterAlgorithm, windows, value || null),
      true,
    )
    const { model } = lease
    lease.state = lease.slice > 0 ? model.refund(full, windows, at, lease.slice) : full
    lease.syncedAt = at
    let exhaustedUntil = 0
    for (const window of windows) {
      if (model.fitsAt(full, window, at, 1) <= at) continue
      // Waits until every live process's slice fits: one unit at a time would cost every process
      // a round trip for each unit that frees, all but one of them refused.
      const wait = Math.min(window.limit, Math.max(1, this.sliceSize(lease)) * instances)
      const until = model.fitsAt(full, window, at, wait)
      if (until > exhaustedUntil) exhaustedUntil = until
    }
    lease.exhaustedUntil = exhaustedUntil
  }

  /**
   * Units a slice asks for: `max(min, headroom × units admitted per sync interval)`, counting
   * `extra` units about to be admitted, and at least the largest cost asked of the key; 0 for a
   * key gone idle. `beside`: for a round trip beside another on the key, headroom on `extra` alone.
   */
  sliceSize(lease: Lease, extra = 0, beside = false): number {
    if (lease.transient) return 0
    const { headroom, min } = this.sizing
    const wanted = headroom * (beside ? extra : Math.max(lease.perInterval, lease.admitted + extra))
    return wanted < IDLE ? 0 : Math.max(min, lease.largestCost, Math.ceil(wanted))
  }

  /**
   * At a sync, the slice the key should hold from now on, sized on its units admitted per
   * interval: the largest of its recent intervals, decaying by a quarter an interval, so that a
   * key decided on now and then, in bursts, keeps a slice that covers them; a key idle long
   * enough gives its whole slice back. With `closing`, everything goes back.
   */
  resize(lease: Lease, now: number, closing: boolean): number {
    const elapsed = now - lease.syncedAt
    const { syncIntervalMs } = this.sizing
    const measured =
      lease.syncedAt > 0 && elapsed > syncIntervalMs ? (lease.admitted * syncIntervalMs) / elapsed : lease.admitted
    lease.perInterval = Math.max(measured, DECAY * lease.perInterval)
    lease.admitted = 0
    const size = closing ? 0 : this.sliceSize(lease)
    if (lease.slice > size) {
      this.give(lease, lease.sliceAt, lease.slice - size)
      lease.slice = size
    }
    return size
  }

  /**
   * The decision from the slices alone, or undefined when it needs Redis: a consume that a
   * slice does not cover, unless Redis had no unit left for it. Refunds go back into the
   * slices, or are given back to Redis; peeks answer from what the process last saw.
   */
  decide(request: StoreRequest, leases: readonly Lease[], now: number, margin: number): StoreResult | undefined {
    const { operation, cost, random } = request
    for (const lease of leases) this.expire(lease, now, margin)
    if (operation === 'refund') return this.refund(leases, cost, now)
    let covered = true
    let exhausted = false
    for (const lease of leases) {
      if (cost > lease.largestCost && operation === 'consume') lease.largestCost = cost
      if (lease.slice < cost) {
        covered = false
        if (lease.exhaustedUntil > now) exhausted = true
      }
    }
    if (!covered && !exhausted && operation === 'consume') return undefined
    // What the process last saw, read as any decision reads its state: whether the cost fits
    // each window (for a peek the slices do not cover), whether a window sheds it.
    let found = 0
    for (const lease of leases) found |= lease.model.read(lease.state, lease.target.windows, now, cost, random)
    const fits = covered || (operation === 'peek' && !exhausted && (found & LIMITED) === 0)
    const shed = fits && (found & SHEDS) !== 0
    const allowed = fits && !shed
    const charged = allowed && operation === 'consume' && cost > 0
    const windows: StoreWindowResult[] = []
    for (const lease of leases) {
      const { model, target } = lease
      const at = windows.length
      model.settle(
        lease.state,
        target.windows,
        now,
        cost,
        charged ? 1 : 0,
        shed ? random : undefined,
        windows,
        at,
        settled,
      )
      lease.state = settled.state
      if (charged) {
        lease.slice -= cost
        lease.admitted += cost
        this.listed.add(lease)
      } else if (!allowed && !shed && lease.slice < cost && lease.exhaustedUntil > now) {
        // Redis had no unit left for this key: it frees no sooner than Redis said, and no more
        // than the slice holds remains.
        for (let i = at; i < windows.length; i++) {
          const answer = windows[i] as StoreWindowResult
          if (answer.fitsAtMs < lease.exhaustedUntil) answer.fitsAtMs = lease.exhaustedUntil
          if (answer.remaining > lease.slice) answer.remaining = lease.slice
        }
      }
    }
    if (shed) return { allowed: false, shed, nowMs: now, windows }
    return { allowed, nowMs: now, windows }
  }

  private refund(leases: readonly Lease[], cost: number, now: number): StoreResult {
    const windows: StoreWindowResult[] = []
    for (const lease of leases) {
      const { model, target } = lease
      if (cost > 0) {
        // Units Redis still counts: back into the slice while it lasts, else given back.
        if (lease.slice > 0) lease.slice += cost
        else this.give(lease, now, cost)
        lease.admitted = Math.max(0, lease.admitted - cost)
      }
      model.settle(
        lease.state,
        target.windows,
        now,
        cost,
        cost > 0 ? -1 : 0,
        undefined,
        windows,
        windows.length,
        settled,
      )
      lease.state = settled.state
    }
    return { allowed: true, nowMs: now, windows }
  }

  private fresh(key: string, target: StoreTarget): Lease {
    return {
      key,
      target,
      model: algorithms[target.algorithm] as Algorithm<unknown>,
      state: undefined,
      slice: 0,
      sliceAt: 0,
      sliceEndsAt: 0,
      given: [],
      admitted: 0,
      perInterval: 0,
      largestCost: 0,
      syncedAt: 0,
      exhaustedUntil: 0,
      inFlight: 0,
      transient: false,
    }
  }

  /**
   * Makes room for one more key: the oldest that holds nothing and has nothing under way; false
   * when every one holds units or is under way. A lease that holds units is never dropped (they
   * would be lost to the fleet until their window ends), but the oldest idle one is made to give
   * its slice back, so that it can go once the next sync has taken it: `maxKeys` bounds the book,
   * and a key past it is decided in Redis meanwhile (`transient`).
   */
  private evictOne(): boolean {
    let holding: Lease | undefined
    let looked = 0
    for (const [key, lease] of this.leases) {
      // A bounded look from the oldest: a book full of held slices must not cost each new key a scan.
      if (++looked > EVICTION_LOOK) break
      if (lease.inFlight > 0) continue
      if (lease.slice === 0 && lease.given.length === 0) {
        this.leases.delete(key)
        this.listed.delete(lease)
        return true
      }
      if (holding === undefined && lease.slice > 0) holding = lease
    }
    if (holding !== undefined) this.expire(holding, Number.POSITIVE_INFINITY, 0)
    return false
  }
}

/** When the first of the windows that hold `at` ends: a slice reserved at `at` is usable until then. */
export function endOf(windows: readonly Window[], at: number): number {
  let end = Number.POSITIVE_INFINITY
  for (const window of windows) {
    const ends = (Math.floor(at / window.periodMs) + 1) * window.periodMs
    if (ends < end) end = ends
  }
  return end
}
