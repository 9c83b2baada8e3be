import type { TollgateError } from '../../support/errors.js'

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
