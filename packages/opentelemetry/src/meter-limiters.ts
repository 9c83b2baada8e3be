import type { Attributes, BatchObservableCallback, Meter, Observable } from '@opentelemetry/api'
import {
  DECISION_OUTCOMES,
  type DecisionCounts,
  describeValue,
  type HybridStoreView,
  hybridStoreOf,
  type Limiter,
  onRulesEvents,
  STORE_ERROR_KINDS,
  TollgateConfigError,
} from '@tollgate/core'
import { DecisionSpans, RESULT, RULE } from './decision-spans.js'
import { HybridStoreReport } from './hybrid-store-report.js'
import {
  BREAKER_STATES,
  type DecisionInstruments,
  decisionInstruments,
  type HybridInstruments,
  hybridInstruments,
} from './instruments.js'
import { ERROR_TYPE, LIMITER_NAME, RELOAD_RESULT, WINDOW } from './metric-attributes.js'
import { PointTotals } from './point-totals.js'

export interface Attachment {
  readonly counts: DecisionCounts
  readonly limiterName: string | undefined
  readonly spanAttributes: boolean
}

interface AttachedLimiter {
  readonly limiter: Limiter
  readonly counts: DecisionCounts
  /** What every data point of the limiter carries beside its own attributes. */
  readonly attributes: Attributes
  readonly hybrid: HybridStoreView | undefined
  rulesEpoch: number
}

/**
 * The SDK keeps one value per instrument and attribute set from each collection, whichever
 * callback observed it last: the limiters on one meter report through one callback, kept here.
 */
const BY_METER = new WeakMap<Meter, MeterLimiters>()

/**
 * The limiters reported through one meter: one callback reads them all and combines their values
 * per attribute set (counts summed, states at their highest), so that each limiter's decisions
 * count wherever they are, and closing one takes out only what it added.
 */
export class MeterLimiters {
  private readonly instruments: DecisionInstruments
  private hybridInstruments: HybridInstruments | undefined
  private readonly attached = new Map<Limiter, AttachedLimiter>()
  /** By store, then by the attributes of the limiters that decide on it. */
  private readonly hybridReports = new Map<HybridStoreView, Map<string, HybridStoreReport>>()
  /** The observables the callback is registered for, while a limiter is attached. */
  private listening: Observable[] | undefined

  /** The instruments are made for the first limiter attached: the duration histogram takes its settings. */
  static of(meter: Meter, first: DecisionCounts): MeterLimiters {
    let limiters = BY_METER.get(meter)
    if (limiters === undefined) {
      limiters = new MeterLimiters(meter, first)
      BY_METER.set(meter, limiters)
    }
    return limiters
  }

  /** The duration histogram's settings, the first limiter's. */
  private readonly timeEvery: number
  private readonly bounds: readonly number[]

  private constructor(
    private readonly meter: Meter,
    first: DecisionCounts,
  ) {
    this.instruments = decisionInstruments(meter, first)
    this.timeEvery = first.timeEvery
    this.bounds = [...first.durations.bounds]
  }

  /** Reports `limiter` from now on; returns the function that stops, taking out what it added. */
  attach(limiter: Limiter, { counts, limiterName, spanAttributes }: Attachment): () => void {
    this.checkSharedHistogram(counts)
    if (this.attached.has(limiter)) {
      throw new TollgateConfigError(
        'openTelemetryMetrics: this limiter already reports to this MeterProvider; close() the metrics attached before attaching it again',
      )
    }
    const attributes: Attributes = limiterName === undefined ? {} : { [LIMITER_NAME]: limiterName }
    const { reloads, durations } = this.instruments
    // First: a limiter that takes no more observers throws, and nothing here has changed.
    const detach = limiter.observe(new DecisionSpans(counts, durations, spanAttributes, attributes))
    const hybrid = hybridStoreOf(limiter.store)
    const attached: AttachedLimiter = { limiter, counts, attributes, hybrid, rulesEpoch: 0 }
    this.attached.set(limiter, attached)

    const applied = { ...attributes, [RELOAD_RESULT]: 'applied' }
    const rejected = { ...attributes, [RELOAD_RESULT]: 'rejected' }
    const stopRules = onRulesEvents(limiter, {
      applied(epoch) {
        reloads.add(1, applied)
        if (epoch !== undefined) attached.rulesEpoch = epoch
      },
      rejected: () => reloads.add(1, rejected),
    })
    const report = hybrid && this.reportOf(hybrid, attributes)
    report?.join(counts)
    this.listen()

    return () => {
      detach()
      stopRules()
      this.attached.delete(limiter)
      if (hybrid && report?.leave(counts)) this.dropReport(hybrid, attributes)
      this.listen()
    }
  }

  private readonly collect: BatchObservableCallback = (result) => {
    const totals = new PointTotals()
    const { requests, units, denials, storeErrors, breaker, epoch } = this.instruments
    for (const { limiter, counts, attributes, hybrid, rulesEpoch } of this.attached.values()) {
      for (const rule of counts.rules()) {
        DECISION_OUTCOMES.forEach((outcome, i) => {
          const point = { ...attributes, [RULE]: rule.rule, [RESULT]: outcome }
          totals.add(requests, point, rule.decisions[i] as number)
          totals.add(units, point, rule.units[i] as number)
        })
        for (const window of rule.windows) {
          totals.add(denials, { ...attributes, [RULE]: rule.rule, [WINDOW]: window.window }, window.denials)
        }
      }
      for (const kind of STORE_ERROR_KINDS) {
        // A HybridStore's failed syncs are added by its report, once however many limiters share it.
        const value = kind === 'sync' && hybrid !== undefined ? 0 : counts.storeErrors[kind]
        totals.add(storeErrors, { ...attributes, [ERROR_TYPE]: kind }, value)
      }
      totals.raise(breaker, attributes, BREAKER_STATES.indexOf(limiter.breakerState))
      totals.raise(epoch, attributes, rulesEpoch)
    }
    for (const reports of this.hybridReports.values()) {
      for (const report of reports.values()) report.observe(totals, storeErrors)
    }
    totals.observeInto(result)
  }

  private reportOf(store: HybridStoreView, attributes: Attributes): HybridStoreReport {
    this.hybridInstruments ??= hybridInstruments(this.meter)
    let reports = this.hybridReports.get(store)
    if (reports === undefined) {
      reports = new Map()
      this.hybridReports.set(store, reports)
    }
    const key = JSON.stringify(attributes)
    let report = reports.get(key)
    if (report === undefined) {
      report = new HybridStoreReport(store, attributes, this.hybridInstruments)
      reports.set(key, report)
    }
    return report
  }

  private dropReport(store: HybridStoreView, attributes: Attributes): void {
    const reports = this.hybridReports.get(store)
    reports?.delete(JSON.stringify(attributes))
    if (reports?.size === 0) this.hybridReports.delete(store)
  }

  /** Registers the callback for every observable made so far while a limiter is attached, and only then. */
  private listen(): void {
    if (this.listening) this.meter.removeBatchObservableCallback(this.collect, this.listening)
    this.listening = undefined
    if (this.attached.size === 0) return
    const { requests, units, denials, storeErrors, breaker, epoch } = this.instruments
    this.listening = [requests, units, denials, storeErrors, breaker, epoch]
    if (this.hybridInstruments) {
      const { staleness, trackedKeys, overAdmitted, leaseRoundTrips } = this.hybridInstruments
      this.listening.push(staleness, trackedKeys, overAdmitted, leaseRoundTrips)
    }
    this.meter.addBatchObservableCallback(this.collect, this.listening)
  }

  /** One histogram holds every limiter's decision times: its sampling and buckets must be theirs. */
  private checkSharedHistogram(counts: DecisionCounts): void {
    const bounds = [...counts.durations.bounds]
    const mismatch =
      counts.timeEvery !== this.timeEvery
        ? { option: 'timeEvery', value: counts.timeEvery, firsts: this.timeEvery }
        : bounds.length !== this.bounds.length || bounds.some((bound, i) => bound !== this.bounds[i])
          ? { option: 'durationBuckets', value: bounds, firsts: this.bounds }
          : undefined
    if (mismatch === undefined) return
    throw new TollgateConfigError(
      `openTelemetryMetrics option ${mismatch.option} must be the same for every limiter on one MeterProvider, whose tollgate.rate_limiting.decision.duration is one histogram: got ${describeValue(mismatch.value)}, and ${describeValue(mismatch.firsts)} for the first limiter attached there`,
    )
  }
}
