import type { HybridStats, Store, SyncReport } from '@tollgate/core'

/**
 * The part of a HybridStore metrics read, told by its shape rather than `instanceof`: an app that
 * loads `@tollgate/core` both as ESM and as CommonJS holds two HybridStore classes.
 */
export interface HybridStoreView {
  stats(): HybridStats
  on(event: 'sync', listener: (report: SyncReport) => void): unknown
  off(event: 'sync', listener: (report: SyncReport) => void): unknown
}

export function hybridStoreOf(store: Store): HybridStoreView | undefined {
  const candidate = store as Partial<HybridStoreView> & { syncNow?: unknown }
  return typeof candidate.stats === 'function' &&
    typeof candidate.syncNow === 'function' &&
    typeof candidate.on === 'function' &&
    typeof candidate.off === 'function'
    ? (candidate as HybridStoreView)
    : undefined
}
