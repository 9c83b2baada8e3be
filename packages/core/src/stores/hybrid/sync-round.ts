import type { TollgateError } from '../../support/errors.js'
import type { HybridMode } from './mode.js'
import type { HybridConfig } from './options.js'
import type { Outage } from './outage.js'
import type { RedisLink } from './redis-link.js'
import type { SyncReport } from './reports.js'
import { type ChunkOutcome, chunksOf, inTurnByNode, rangesOf, startInTurn } from './sync-wire.js'

/**
 * One sync, whichever the mode: its keys in calls of a chunk each, at most a few per Redis node
 * at once and a Cluster's masters in turn, the heartbeat with the first; the wait bounded by
 * Redis's silence, not by the sync's length; each node's health and the real sync period from
 * what answered.
 */
export class SyncRounds {
  /** The time between the starts of the last two syncs (the store's clock), 0 before the second. */
  periodMs = 0
  private lastStartAt = 0
  /** Whether the last sync took longer than the interval, warned once until one does not. */
  private slowNoticed = false
  private roundTripsReported = 0

  constructor(
    private readonly link: RedisLink,
    private readonly config: HybridConfig,
    private readonly mode: HybridMode,
    private readonly outage: Outage,
    /** Keys read on each sync, and who hears their values. */
    private readonly readsEachSync: ReadonlyMap<string, ReadonlySet<(value: string | null) => void>>,
  ) {}

  /** Pushes and pulls what waits, and says how it went; never rejects. */
  async run(closing: boolean): Promise<SyncReport> {
    const started = performance.now()
    const report: SyncReport = {
      keys: 0,
      overAdmitted: 0,
      pushedUnits: 0,
      durationMs: 0,
      leaseRoundTrips: 0,
      reservedUnits: 0,
    }
    const { link } = this
    let now: number
    try {
      now = link.now()
    } catch (error) {
      report.error = error as TollgateError
      return this.reported(report, started)
    }
    if (this.lastStartAt > 0) {
      this.periodMs = now - this.lastStartAt
      report.syncPeriodMs = this.periodMs
    }
    this.lastStartAt = now
    const batch = this.mode.batch(now, link.timeArg(now), closing)
    report.keys = batch.size
    report.pushedUnits = batch.pushedUnits
    // Alive for three periods: a process whose syncs run slow is still counted between them.
    const alive = 3 * Math.max(this.config.syncIntervalMs, this.periodMs)
    const heartbeat: [string, string] = [link.heartbeatKey, `${link.instance} ${alive}`]
    // The heartbeat rides with the first chunk; on a Cluster, whose chunks each hold one master's
    // keys or one slot's, or with nothing to sync, it goes alone.
    const chunks = link.cluster
      ? chunksOf(batch.size, batch.slotOf, batch.slotsPerCall === 'master' ? link.health.masterOfSlot : undefined)
      : rangesOf(batch.size)
    const calls = chunks.map((chunk, i) => ({ chunk, heartbeat: i === 0 && !link.cluster }))
    if (link.cluster || calls.length === 0) calls.unshift({ chunk: { indices: [], slotRuns: [] }, heartbeat: true })
    this.readEachSyncKeys()
    const firstKeys = calls.map(({ chunk }) =>
      chunk.indices.length > 0 ? batch.nameOf(chunk.indices[0] as number) : link.heartbeatKey,
    )
    // Calls whose master the client has not learned yet (it connects on its first command) count as one node.
    const order = inTurnByNode(firstKeys.map((key) => link.health.masterOf(key) ?? ''))
    const outcomes = startInTurn(
      calls.map(
        ({ chunk, heartbeat: carries }) =>
          () =>
            batch.send(chunk.indices, chunk.indices.map(batch.nameOf), carries ? heartbeat : undefined, chunk.slotRuns),
      ),
      order,
    )
    // Calls that failed at an earlier sync go again as they were, beside this sync's own.
    for (const resent of batch.resend()) {
      report.pushedUnits += resent.pushedUnits
      firstKeys.push(resent.key)
      outcomes.push(resent.outcome)
    }
    const nodes = firstKeys.map((key) => link.health.nodeOf(key))
    // A failing master this sync has nothing for is asked about a key it serves: its answer ends
    // its outage, and its keys' decisions follow the fleet's totals again.
    const covered = new Set(nodes)
    for (const [node, key] of [...link.health.probes()]) {
      if (covered.has(node)) continue
      nodes.push(node)
      firstKeys.push(key)
      outcomes.push(link.probe(key))
    }
    const settled = await this.settled(outcomes, report)
    const failedNodes = new Set<string>()
    settled.forEach((outcome, i) => {
      if (outcome === undefined || outcome instanceof Error) failedNodes.add(nodes[i] as string)
      if (outcome === undefined) return
      if (outcome instanceof Error) {
        report.error ??= link.failure(`the sync failed: ${outcome.message}`, outcome)
        return
      }
      report.overAdmitted += outcome.overAdmitted
      if (outcome.instances !== undefined) {
        report.instances = outcome.instances
        link.instances = Math.max(1, outcome.instances)
      }
      if (outcome.keyError) report.error ??= outcome.keyError
      if (outcome.refused) report.error ??= outcome.refused
    })
    const aside = batch.aside()
    report.overAdmitted += aside.overAdmitted
    report.pushedUnits += aside.pushedUnits
    const at = link.safeNow()
    for (const node of nodes) if (!failedNodes.has(node)) link.health.answered(node, at)
    firstKeys.forEach((key, i) => {
      const node = nodes[i] as string
      if (failedNodes.has(node)) link.health.failed(node, key)
    })
    if (failedNodes.size === 0) {
      link.lastGoodSyncAt = link.safeNow()
      this.outage.recovered()
      this.mode.synced(link.lastGoodSyncAt)
      report.instances ??= link.instances
    }
    return this.reported(report, started)
  }

  /** Keys read on each sync: written with the chunks, so answered in the same round trip; a failure is the sync's to report. */
  private readEachSyncKeys(): void {
    const { connection } = this.config
    for (const [key, hearing] of this.readsEachSync) {
      connection.get(key).then(
        (value) => {
          for (const onValue of hearing) onValue(value)
        },
        () => {},
      )
    }
  }

  /**
   * Each call's outcome as it settles; undefined for those still out when Redis fell silent. The
   * wait is for Redis's silence, not for the whole sync: a sync of many keys takes as long as it
   * takes while calls keep answering; once none has answered for `syncTimeoutMs`, the nodes of
   * those still out failed.
   */
  private async settled(
    outcomes: ReadonlyArray<Promise<ChunkOutcome | Error>>,
    report: SyncReport,
  ): Promise<Array<ChunkOutcome | Error | undefined>> {
    const settled: Array<ChunkOutcome | Error | undefined> = outcomes.map(() => undefined)
    let heardAt = performance.now()
    const all = Promise.all(
      outcomes.map((outcome, i) =>
        outcome.then((value) => {
          heardAt = performance.now()
          settled[i] = value
        }),
      ),
    )
    const timedOut = Symbol('timed out')
    const { syncTimeoutMs } = this.config
    let timer: NodeJS.Timeout | undefined
    const silence = new Promise<typeof timedOut>((resolve) => {
      const check = (): void => {
        const quiet = performance.now() - heardAt
        if (quiet >= syncTimeoutMs) resolve(timedOut)
        else {
          timer = setTimeout(check, syncTimeoutMs - quiet)
          timer.unref()
        }
      }
      timer = setTimeout(check, syncTimeoutMs)
      timer.unref()
    })
    if ((await Promise.race([all, silence])) === timedOut) {
      report.error = this.link.failure(`the sync heard nothing from Redis for ${syncTimeoutMs} ms`)
    }
    clearTimeout(timer)
    return settled
  }

  private reported(report: SyncReport, started: number): SyncReport {
    report.durationMs = performance.now() - started
    this.noticeSlow(report.durationMs)
    const counts = this.mode.counts()
    report.leaseRoundTrips = counts.leaseRoundTrips - this.roundTripsReported
    this.roundTripsReported = counts.leaseRoundTrips
    report.reservedUnits = counts.reservedUnits
    return report
  }

  /**
   * A sync longer than the interval lengthens the real period, and with it the staleness and the
   * over-admission bound: said once (`TG_HYBRID_SYNC_SLOW`) until a sync ends within the interval.
   */
  private noticeSlow(durationMs: number): void {
    const { syncIntervalMs } = this.config
    if (durationMs <= syncIntervalMs) {
      this.slowNoticed = false
      return
    }
    if (this.slowNoticed) return
    this.slowNoticed = true
    this.config.warn(
      `HybridStore: a sync took ${Math.round(durationMs)} ms, longer than syncIntervalMs ${syncIntervalMs}: the real period (stats().syncPeriodMs) sets the over-admission bound, and grows with the keys a sync carries; see docs/hybrid.md, "Capacity"`,
      'TG_HYBRID_SYNC_SLOW',
    )
  }
}
