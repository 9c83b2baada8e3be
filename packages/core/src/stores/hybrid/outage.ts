import { LocalCounts } from '../shared/local-counts.js'
import type { StoreRequest, StoreResult, StoreTarget } from '../store.js'
import type { HybridConfig } from './options.js'
import type { RedisLink } from './redis-link.js'

/**
 * A HybridStore's decisions while no sync reaches a key's Redis node for `outage.afterMs`: the
 * outage policy's answer, warned once when the outage starts (`TG_HYBRID_DEGRADED`) and once when
 * syncs reach Redis again (`TG_HYBRID_RECOVERED`).
 */
export class Outage {
  private table: LocalCounts | undefined
  private noticed = false

  constructor(
    private readonly link: RedisLink,
    private readonly config: HybridConfig,
  ) {}

  /** Counts the policy keeps while it decides (`'local-*'`). */
  get size(): number {
    return this.table?.size ?? 0
  }

  /** Whether decisions on these targets follow the policy at `now`. */
  applies(targets: readonly StoreTarget[], now: number): boolean {
    if (!this.link.downFor(targets, now)) return false
    if (!this.noticed) {
      this.noticed = true
      const { outagePolicy, outageAfterMs } = this.config
      this.config.warn(
        `HybridStore: no sync has reached Redis for ${now - this.link.lastSyncOrStart()} ms (outage.afterMs ${outageAfterMs}); decisions follow the outage policy '${outagePolicy}' until one does`,
        'TG_HYBRID_DEGRADED',
      )
    }
    return true
  }

  /** The policy's answer for a decision made without Redis, on the targets' keys. */
  answer(keys: readonly string[], request: StoreRequest, now: number): StoreResult {
    const { outagePolicy } = this.config
    const error = this.link.failure(`no sync has reached Redis for ${now - this.link.lastSyncOrStart()} ms`)
    if (outagePolicy === 'allow' || outagePolicy === 'deny') {
      return { allowed: outagePolicy === 'allow', nowMs: now, windows: [], outage: { policy: outagePolicy, error } }
    }
    this.table ??= new LocalCounts(outagePolicy === 'local-share' ? this.link.instances : 1, this.config.maxTrackedKeys)
    const result = this.table.evaluate(keys, request, now)
    result.outage = { policy: 'local', error }
    return result
  }

  /** A sync reached every node: decisions follow the fleet's totals again, the policy's counts dropped. */
  recovered(): void {
    if (!this.noticed || this.link.health.failing) return
    this.noticed = false
    this.table = undefined
    this.config.warn("HybridStore: syncs reach Redis again; decisions follow the fleet's totals", 'TG_HYBRID_RECOVERED')
  }
}
