import {
  type Attributes,
  type BatchObservableCallback,
  type MeterProvider,
  metrics,
  type Observable,
  type ObservableCounter,
} from '@opentelemetry/api'
import {
  type BreakerState,
  checkOptionsObject,
  DECISION_OUTCOMES,
  DecisionCounts,
  type DecisionCountsOptions,
  hybridStoreOf,
  type Limiter,
  onRulesEvents,
  optionKeys,
  STORE_ERROR_KINDS,
  TollgateConfigError,
} from '@tollgate/core'
import { DecisionSpans, RESULT, RULE } from './decision-spans.js'

export interface OpenTelemetryMetricsOptions extends DecisionCountsOptions {
  /**
   * Where the instruments are made.
   * @default the global MeterProvider (`metrics.getMeterProvider()`)
   * @example { meterProvider: new MeterProvider({ readers: [reader] }) }
   */
  meterProvider?: MeterProvider
  /**
   * Whether each `consume` decision sets its rule, outcome and retry-after on the active span
   * (`trace.getActiveSpan()`), when there is one and it records. No span is made per decision.
   * @default true
   * @example { spanAttributes: false }
   */
  spanAttributes?: boolean
}

export interface OpenTelemetryMetrics {
  /** What the observable instruments read: the limiter's decisions counted as they are made. */
  readonly counts: DecisionCounts
  /** Detaches from the limiter and its store and stops the observable instruments' callback. */
  close(): void
}

/** The meter's name, as instrumentation scopes are named: the package's. */
export const METER_NAME = '@tollgate/opentelemetry'

const WINDOW = 'tollgate.rate_limiting.window'
const ERROR_TYPE = 'error.type'
const RELOAD_RESULT = 'tollgate.rules.reload.result'
/** `tollgate.breaker.state`'s value is the state's index here. */
const BREAKER_STATES: readonly BreakerState[] = ['closed', 'half-open', 'open']
const SYNC_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
const OPTION_KEYS = optionKeys<OpenTelemetryMetricsOptions>({
  meterProvider: true,
  spanAttributes: true,
  maxRules: true,
  timeEvery: true,
  durationBuckets: true,
})

/**
 * Reports the limiter's decisions as OpenTelemetry instruments, through `@opentelemetry/api`
 * only. Decisions are counted by the limiter as they are made; the observable instruments read
 * those counts when the SDK collects. Rule attributes are bounded by `maxRules`; identifiers are
 * never attributes.
 * @example
 * const telemetry = openTelemetryMetrics(limiter)
 */
export function openTelemetryMetrics(
  limiter: Limiter,
  options: OpenTelemetryMetricsOptions = {},
): OpenTelemetryMetrics {
  const { meterProvider, spanAttributes = true, ...countsOptions } = checkedOptions(limiter, options)
  const counts = new DecisionCounts(countsOptions)
  const meter = (meterProvider ?? metrics.getMeterProvider()).getMeter(METER_NAME)
  const hybrid = hybridStoreOf(limiter.store)

  const requests = meter.createObservableCounter('tollgate.rate_limiting.requests', {
    description: 'consume decisions, by rule asked and result',
    unit: '{request}',
  })
  const units = meter.createObservableCounter('tollgate.rate_limiting.cost', {
    description: 'units consume decisions asked for (their cost), by rule asked and result',
    unit: '{unit}',
  })
  const denials = meter.createObservableCounter('tollgate.rate_limiting.window.denials', {
    description: "decisions a window refused or shed (or would have, in dry run), by the window's rule and period",
    unit: '{request}',
  })
  const durations = meter.createHistogram('tollgate.rate_limiting.decision.duration', {
    description:
      counts.timeEvery > 0
        ? `time from asking the store to the decision, of one consume decision in ${counts.timeEvery} (sampled)`
        : 'time from asking the store to the decision (not measured: timeEvery is 0)',
    unit: 's',
    advice: { explicitBucketBoundaries: [...counts.durations.bounds] },
  })
  const storeErrors = meter.createObservableCounter('tollgate.store.errors', {
    description: 'store failures, by error.type: timeout, unavailable, key, breaker_open, sync',
    unit: '{error}',
  })
  const breaker = meter.createObservableGauge('tollgate.breaker.state', {
    description: "the store's circuit breaker: 0 closed, 1 half-open, 2 open",
  })
  const epoch = meter.createObservableGauge('tollgate.rules.epoch', {
    description: 'the epoch of the rules in force (rules that change at run time); 0 until a set of rules is applied',
  })
  const reloads = meter.createCounter('tollgate.rules.reloads', {
    description: `sets of rules offered at run time, by ${RELOAD_RESULT}: applied or rejected`,
    unit: '{reload}',
  })
  const observables: Observable[] = [requests, units, denials, storeErrors, breaker, epoch]
  let rulesEpoch = 0

  const hybridInstruments = hybrid && {
    staleness: meter.createObservableGauge('tollgate.hybrid.staleness', {
      description:
        'time since the last HybridStore sync that reached Redis (since the store started, before the first)',
      unit: 's',
    }),
    trackedKeys: meter.createObservableGauge('tollgate.hybrid.tracked_keys', {
      description: 'keys the HybridStore tracks in this process',
      unit: '{key}',
    }),
    overAdmitted: meter.createObservableCounter('tollgate.hybrid.overadmitted', {
      description: "units this process pushed above a window's limit at its syncs, by rule",
      unit: '{unit}',
    }),
    leaseRoundTrips: meter.createObservableCounter('tollgate.hybrid.lease.round_trips', {
      description: 'round trips to Redis for leases of strict rules, by rule',
      unit: '{round_trip}',
    }),
  }
  if (hybridInstruments) observables.push(...Object.values(hybridInstruments))

  const collect: BatchObservableCallback = (result) => {
    for (const rule of counts.rules()) {
      DECISION_OUTCOMES.forEach((outcome, i) => {
        const attributes = { [RULE]: rule.rule, [RESULT]: outcome }
        result.observe(requests, rule.decisions[i] as number, attributes)
        result.observe(units, rule.units[i] as number, attributes)
      })
      for (const window of rule.windows)
        result.observe(denials, window.denials, { [RULE]: rule.rule, [WINDOW]: window.window })
    }
    for (const kind of STORE_ERROR_KINDS) result.observe(storeErrors, counts.storeErrors[kind], { [ERROR_TYPE]: kind })
    result.observe(breaker, BREAKER_STATES.indexOf(limiter.breakerState))
    result.observe(epoch, rulesEpoch)
    if (hybrid && hybridInstruments) {
      const stats = hybrid.stats()
      result.observe(hybridInstruments.staleness, stats.stalenessMs / 1000)
      result.observe(hybridInstruments.trackedKeys, stats.trackedKeys)
      observeByRule(result, hybridInstruments.overAdmitted, counts, stats.overAdmittedByRule)
      observeByRule(result, hybridInstruments.leaseRoundTrips, counts, stats.leaseRoundTripsByRule)
    }
  }
  meter.addBatchObservableCallback(collect, observables)

  const stopRules = onRulesEvents(limiter, {
    applied(value) {
      reloads.add(1, { [RELOAD_RESULT]: 'applied' })
      if (value !== undefined) rulesEpoch = value
    },
    rejected: () => reloads.add(1, { [RELOAD_RESULT]: 'rejected' }),
  })
  let stopHybrid = () => {}
  if (hybrid) {
    const syncs = meter.createHistogram('tollgate.hybrid.sync.duration', {
      description: 'time each HybridStore sync took, failed syncs included',
      unit: 's',
      advice: { explicitBucketBoundaries: SYNC_BUCKETS },
    })
    const synced = (report: { durationMs: number; error?: unknown }) => {
      syncs.record(report.durationMs / 1000)
      if (report.error !== undefined) counts.storeFailed('sync')
    }
    hybrid.on('sync', synced)
    stopHybrid = () => hybrid.off('sync', synced)
  }
  const detach = limiter.observe(new DecisionSpans(counts, durations, spanAttributes))

  let closed = false
  return {
    counts,
    close() {
      if (closed) return
      closed = true
      detach()
      stopRules()
      stopHybrid()
      meter.removeBatchObservableCallback(collect, observables)
    },
  }
}

/** Per rule label (every one decided on, at 0 when absent from `values`), the values summed. */
function observeByRule(
  result: Parameters<BatchObservableCallback>[0],
  counter: ObservableCounter,
  counts: DecisionCounts,
  values: Iterable<[string, number]>,
): void {
  for (const [rule, value] of counts.totalsByRule(values)) {
    result.observe(counter, value, { [RULE]: rule } satisfies Attributes)
  }
}

function checkedOptions(limiter: Limiter, options: OpenTelemetryMetricsOptions): OpenTelemetryMetricsOptions {
  if (typeof (limiter as Partial<Limiter> | null)?.observe !== 'function') {
    throw new TollgateConfigError(
      'openTelemetryMetrics takes a limiter made by createLimiter of @tollgate/core (one with observe()) as its first argument',
    )
  }
  const { meterProvider, spanAttributes } = checkOptionsObject(options, OPTION_KEYS, 'openTelemetryMetrics')
  if (meterProvider !== undefined && typeof (meterProvider as Partial<MeterProvider> | null)?.getMeter !== 'function') {
    throw new TollgateConfigError(
      "openTelemetryMetrics option meterProvider must be a MeterProvider, such as the SDK's new MeterProvider({ readers })",
    )
  }
  if (spanAttributes !== undefined && typeof spanAttributes !== 'boolean') {
    throw new TollgateConfigError(
      `openTelemetryMetrics option spanAttributes must be true or false, got ${String(spanAttributes)}`,
    )
  }
  return options
}
