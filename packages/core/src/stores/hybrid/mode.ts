import type { Decision } from '../../rules/decision.js'
import type { AlgorithmName } from '../../rules/rules.js'
import type { TargetSlot } from '../shared/decision-targets.js'
import type { LocalCall } from '../shared/local-decision.js'
import type { StoreReceiver, StoreRequest, StoreResult, StoreTarget } from '../store.js'
import type { HybridStats } from './reports.js'
import type { ChunkOutcome } from './sync-wire.js'

/**
 * What a HybridStore's consistency does, the store being the same façade over either:
 * `approximate.ts` (counts synced about once a second) or `strict.ts` (slices of each limit
 * leased from Redis).
 */
export interface HybridMode {
  readonly algorithms: readonly AlgorithmName[]
  /** A decision in the process; undefined when it needs Redis first. */
  decide(request: StoreRequest): StoreResult | undefined
  /**
   * The same decision in one pass, from a limiter's targets to its Decision, where the mode can
   * make it so; undefined leaves it to `decide`.
   */
  decideInProcess?(call: LocalCall, targets: readonly TargetSlot[], count: number): Decision | undefined
  /** A decision `decide` left to Redis. `asker` is told when it goes on the wire. */
  ask(request: StoreRequest, asker?: StoreReceiver): Promise<StoreResult>
  /** Drops what the process holds for a target being reset. */
  forget(target: StoreTarget): void
  /** The keys this sync carries, taken from what waits for it. `time`: the scripts' time argument. */
  batch(now: number, time: string, closing: boolean): SyncBatch
  /** A sync reached every node. */
  synced(now: number): void
  /** The store closes: what the process holds in Redis goes back with the last sync. */
  close(): void
  /** Whether a last sync has anything to carry. */
  unsent(): boolean
  /** The mode's part of `stats()` and of each `SyncReport`. */
  counts(): ModeCounts
}

/** The fields of `stats()` a mode counts (`trackedKeys` its own keys, the outage's counts aside); its maps live, copied by `stats()`. */
export type ModeCounts = Pick<
  HybridStats,
  | 'trackedKeys'
  | 'dirtyKeys'
  | 'evictedUnsynced'
  | 'leaseRoundTrips'
  | 'reservedUnits'
  | 'overAdmittedByRule'
  | 'leaseRoundTripsByRule'
>

/** One sync's keys, and how a chunk of them goes to Redis. */
export interface SyncBatch {
  readonly size: number
  /** Units the batch pushes, refunds subtracted. */
  readonly pushedUnits: number
  /** The key's name, built as its chunk goes out, so that a sync of a million keys does not hold them all at once. */
  nameOf(at: number): string
  /** The key's Cluster slot, by which a sync on a Cluster groups its keys. */
  slotOf(at: number): number
  /**
   * What one call of a sync may cover on a Cluster: a master's keys, whatever their slots (the
   * sync script reads each slot apart), or one slot's (the lease script's calls).
   */
  readonly slotsPerCall: 'master' | 'slot'
  /** Sends the keys at `indices` (named `keys`), the heartbeat with them if given; `slotRuns` as `Chunk`'s. */
  send(
    indices: readonly number[],
    keys: string[],
    heartbeat: [string, string] | undefined,
    slotRuns: readonly number[],
  ): Promise<ChunkOutcome | Error>
  /** Calls that failed at an earlier sync, sent again as they were: each with its first key, which tells its node. */
  resend(): Array<{ key: string; outcome: Promise<ChunkOutcome | Error>; pushedUnits: number }>
  /** Units pushed outside the sync's calls since the last sync, and those of them over a limit. */
  aside(): { pushedUnits: number; overAdmitted: number }
}
