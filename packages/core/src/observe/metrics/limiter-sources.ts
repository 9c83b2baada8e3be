import type { EventEmitter } from 'node:events'
import type { Limiter } from '../../limiter/limiter.js'
import type { HybridStats, SyncReport } from '../../stores/hybrid/reports.js'
import type { Store } from '../../stores/store.js'

/**
 * What metrics read of a limiter beside its decisions, once for every metrics package: its
 * HybridStore's stats and syncs, and its rules' changes.
 */

/**
 * The part of a HybridStore metrics read, told by its shape rather than `instanceof`: an app that
 * loads `@tollgate/core` both as ESM and as CommonJS holds two HybridStore classes.
 */
export interface HybridStoreView {
  stats(): HybridStats
  on(event: 'sync', listener: (report: SyncReport) => void): unknown
  off(event: 'sync', listener: (report: SyncReport) => void): unknown
}

/** The store as a HybridStore, or undefined for any other store. */
export function hybridStoreOf(store: Store): HybridStoreView | undefined {
  const candidate = store as Partial<HybridStoreView> & { syncNow?: unknown }
  return typeof candidate.stats === 'function' &&
    typeof candidate.syncNow === 'function' &&
    typeof candidate.on === 'function' &&
    typeof candidate.off === 'function'
    ? (candidate as HybridStoreView)
    : undefined
}

export interface RulesListener {
  /** A new set of rules applies; `epoch` is the payload's, undefined when it carries none. */
  applied(epoch: number | undefined): void
  rejected(): void
}

/**
 * Listens to the events of rules that change at run time: `rules` ({ epoch, … }) when a set of
 * rules applies, `rules-rejected` when one is refused. A limiter whose rules never change never
 * emits them. Returns the function that stops listening.
 */
export function onRulesEvents(limiter: Limiter, listener: RulesListener): () => void {
  const events = limiter as unknown as EventEmitter
  const applied = (change: { epoch?: unknown } | undefined) =>
    listener.applied(typeof change?.epoch === 'number' ? change.epoch : undefined)
  const rejected = () => listener.rejected()
  events.on('rules', applied)
  events.on('rules-rejected', rejected)
  return () => {
    events.off('rules', applied)
    events.off('rules-rejected', rejected)
  }
}
