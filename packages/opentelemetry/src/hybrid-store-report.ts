import type { Attributes, ObservableCounter } from '@opentelemetry/api'
import type { DecisionCounts, HybridStoreView, SyncReport } from '@tollgate/core'
import { RULE } from './decision-spans.js'
import type { HybridInstruments } from './instruments.js'
import { ERROR_TYPE } from './metric-attributes.js'
import type { PointTotals } from './point-totals.js'

/**
 * One HybridStore as the limiters that decide on it, with the same attributes, report it: its
 * figures and syncs once, however many of them share it, so that a sum over the data points is
 * the store's and not a multiple of it.
 */
export class HybridStoreReport {
  /** The counts of the limiters attached that decide on the store, the first attached first. */
  private readonly members = new Set<DecisionCounts>()

  constructor(
    private readonly store: HybridStoreView,
    private readonly attributes: Attributes,
    private readonly instruments: HybridInstruments,
  ) {
    store.on('sync', this.synced)
  }

  join(counts: DecisionCounts): void {
    this.members.add(counts)
  }

  /** Takes `counts` out; stops listening to the store when no limiter is left, and says so. */
  leave(counts: DecisionCounts): boolean {
    this.members.delete(counts)
    if (this.members.size > 0) return false
    this.store.off('sync', this.synced)
    return true
  }

  observe(totals: PointTotals, storeErrors: ObservableCounter): void {
    const stats = this.store.stats()
    const { attributes, instruments } = this
    // Each limiter counted the failed syncs since it was attached: the first attached, all of them.
    let failedSyncs = 0
    for (const counts of this.members) failedSyncs = Math.max(failedSyncs, counts.storeErrors.sync)
    totals.add(storeErrors, { ...attributes, [ERROR_TYPE]: 'sync' }, failedSyncs)
    totals.raise(instruments.staleness, attributes, stats.stalenessMs / 1000)
    totals.add(instruments.trackedKeys, attributes, stats.trackedKeys)
    this.observeByRule(totals, instruments.overAdmitted, stats.overAdmittedByRule)
    this.observeByRule(totals, instruments.leaseRoundTrips, stats.leaseRoundTripsByRule)
  }

  private readonly synced = (report: SyncReport): void => {
    this.instruments.syncs.record(report.durationMs / 1000, this.attributes)
    if (report.error !== undefined) for (const counts of this.members) counts.storeFailed('sync')
  }

  /**
   * The store's values by rule label, labelled as the first limiter attached labels them (the
   * store keys rules by name, whichever limiter decided), every rule label a limiter decided on
   * there at 0 when the store has no value for it.
   */
  private observeByRule(totals: PointTotals, counter: ObservableCounter, values: Iterable<[string, number]>): void {
    const [first, ...others] = this.members
    if (first === undefined) return
    const byRule = first.totalsByRule(values)
    for (const counts of others) {
      for (const rule of counts.totalsByRule([]).keys()) if (!byRule.has(rule)) byRule.set(rule, 0)
    }
    for (const [rule, value] of byRule) totals.add(counter, { ...this.attributes, [RULE]: rule }, value)
  }
}
