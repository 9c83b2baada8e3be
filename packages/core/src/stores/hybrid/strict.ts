import calculateSlot from 'cluster-key-slot'
import type { AlgorithmName } from '../../rules/rules.js'
import { leaseScript } from '../../scripts/generated.js'
import { operationKeyBeside } from '../shared/operations.js'
import type { StoreReceiver, StoreRequest, StoreResult, StoreTarget } from '../store.js'
import { type Lease, LeaseBook } from './lease-book.js'
import { LeaseExchange } from './leases.js'
import type { HybridMode, ModeCounts, SyncBatch } from './mode.js'
import type { HybridConfig } from './options.js'
import type { Outage } from './outage.js'
import type { RedisLink } from './redis-link.js'

/**
 * `consistency: 'strict'`: the process decides on slices of the limits it reserved in Redis
 * (leases, `lease-book.ts`) and never admits above a limit; a decision its slices do not cover
 * waits for one round trip (`leases.ts`). A sync gives back what idle keys hold and tops slices
 * up. A bucket's tokens reserved at one time and spent later would let it pass its capacity in a
 * burst, and a sliding log's entries are times: it runs the two windowed counters.
 */
export class StrictMode implements HybridMode {
  readonly algorithms: readonly AlgorithmName[] = ['fixed-window', 'sliding-window']
  private readonly book: LeaseBook
  private readonly exchange: LeaseExchange

  constructor(
    private readonly link: RedisLink,
    private readonly outage: Outage,
    config: HybridConfig,
  ) {
    const { leaseHeadroom: headroom, leaseMin: min, syncIntervalMs, prefix } = config
    this.book = new LeaseBook(link.keys, config.maxTrackedKeys, { headroom, min, syncIntervalMs })
    this.exchange = new LeaseExchange({
      book: this.book,
      run: config.connection.script(leaseScript),
      cluster: link.cluster,
      watches: link.watches,
      operationKey: (key) => operationKeyBeside(prefix, key),
      timeOf: (now) => link.timeArg(now),
      instances: () => link.instances,
      instance: link.instance,
      answered: (serverMs, sentAt, key) => link.answered(key, serverMs, sentAt),
    })
  }

  /**
   * On the slices, or refused while Redis had nothing left for them; undefined when it needs a
   * round trip. While no sync reaches Redis, what the slices do not cover follows the outage policy.
   */
  decide(request: StoreRequest): StoreResult | undefined {
    const now = this.link.now()
    const { book } = this
    const leases = request.targets.map((target) => book.leaseOf(target))
    const result = book.decide(request, leases, now, this.link.marginMs())
    if (result !== undefined) return result
    if (!this.outage.applies(request.targets, now)) return undefined
    return this.outage.answer(
      leases.map((lease) => lease.key),
      request,
      now,
    )
  }

  /** A decision the slices did not cover, made in Redis. */
  async ask(request: StoreRequest, asker?: StoreReceiver): Promise<StoreResult> {
    const now = this.link.now()
    const leases: Lease[] = request.targets.map((target) => this.book.leaseOf(target))
    try {
      const result = await this.exchange.decide(request, leases, now, asker)
      this.link.heardFrom(request.targets, this.link.safeNow())
      return result
    } catch (error) {
      throw this.link.failed(request.targets, 'the lease round trip', error)
    }
  }

  /** Slices reserved on it are dropped: Redis forgets them with the key. */
  forget(target: StoreTarget): void {
    this.book.forget(target)
  }

  batch(now: number, _time: string, closing: boolean): SyncBatch {
    const leases = [...this.book.listed]
    this.book.listed.clear()
    const names = leases.map((lease) => lease.key)
    const margin = this.link.marginMs()
    return {
      size: leases.length,
      pushedUnits: 0,
      nameOf: (at) => names[at] as string,
      slotOf: (at) => calculateSlot(names[at] as string),
      slotsPerCall: 'slot',
      send: (indices, keys, heartbeat) =>
        this.exchange.syncChunk(
          indices.map((at) => leases[at] as Lease),
          keys,
          now,
          margin,
          heartbeat,
          closing,
        ),
      resend: () => this.exchange.resendDoubtful().map(([key, outcome]) => ({ key, outcome, pushedUnits: 0 })),
      aside: () => ({ pushedUnits: 0, overAdmitted: 0 }),
    }
  }

  synced(now: number): void {
    this.book.sweep(now)
  }

  close(): void {
    this.book.giveAllBack()
  }

  unsent(): boolean {
    return this.book.listed.size > 0
  }

  counts(): ModeCounts {
    return {
      trackedKeys: this.book.size,
      dirtyKeys: this.book.givingKeys(),
      evictedUnsynced: 0,
      leaseRoundTrips: this.exchange.roundTrips,
      reservedUnits: this.book.reservedUnits(),
      overAdmittedByRule: NONE,
      leaseRoundTripsByRule: this.exchange.roundTripsByRule,
    }
  }
}

const NONE: ReadonlyMap<string, number> = new Map()
