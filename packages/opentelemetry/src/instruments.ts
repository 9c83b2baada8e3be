import type { Counter, Histogram, Meter, ObservableCounter, ObservableGauge } from '@opentelemetry/api'
import type { BreakerState, DecisionCounts } from '@tollgate/core'
import { RELOAD_RESULT } from './metric-attributes.js'

/** The instruments every limiter reports through. */
export interface DecisionInstruments {
  readonly requests: ObservableCounter
  readonly units: ObservableCounter
  readonly denials: ObservableCounter
  readonly storeErrors: ObservableCounter
  readonly breaker: ObservableGauge
  readonly epoch: ObservableGauge
  readonly durations: Histogram
  readonly reloads: Counter
}

/** The instruments of limiters on a HybridStore, made when the first such limiter is attached. */
export interface HybridInstruments {
  readonly staleness: ObservableGauge
  readonly trackedKeys: ObservableGauge
  readonly overAdmitted: ObservableCounter
  readonly leaseRoundTrips: ObservableCounter
  readonly syncs: Histogram
}

/** `tollgate.breaker.state`'s value is the state's index here. */
export const BREAKER_STATES: readonly BreakerState[] = ['closed', 'half-open', 'open']
const SYNC_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

/** The duration histogram's description and buckets are those of `counts`, the first limiter's. */
export function decisionInstruments(meter: Meter, counts: DecisionCounts): DecisionInstruments {
  return {
    requests: meter.createObservableCounter('tollgate.rate_limiting.requests', {
      description: 'consume decisions, by rule asked and result',
      unit: '{request}',
    }),
    units: meter.createObservableCounter('tollgate.rate_limiting.cost', {
      description: 'units consume decisions asked for (their cost), by rule asked and result',
      unit: '{unit}',
    }),
    denials: meter.createObservableCounter('tollgate.rate_limiting.window.denials', {
      description: "decisions a window refused or shed (or would have, in dry run), by the window's rule and period",
      unit: '{request}',
    }),
    durations: meter.createHistogram('tollgate.rate_limiting.decision.duration', {
      description:
        counts.timeEvery > 0
          ? `time from asking the store to the decision, of one consume decision in ${counts.timeEvery} (sampled)`
          : 'time from asking the store to the decision (not measured: timeEvery is 0)',
      unit: 's',
      advice: { explicitBucketBoundaries: [...counts.durations.bounds] },
    }),
    storeErrors: meter.createObservableCounter('tollgate.store.errors', {
      description: 'store failures, by error.type: timeout, unavailable, key, breaker_open, sync',
      unit: '{error}',
    }),
    breaker: meter.createObservableGauge('tollgate.breaker.state', {
      description: "the store's circuit breaker: 0 closed, 1 half-open, 2 open",
    }),
    epoch: meter.createObservableGauge('tollgate.rules.epoch', {
      description: 'the epoch of the rules in force (rules that change at run time); 0 until a set of rules is applied',
    }),
    reloads: meter.createCounter('tollgate.rules.reloads', {
      description: `sets of rules offered at run time, by ${RELOAD_RESULT}: applied or rejected`,
      unit: '{reload}',
    }),
  }
}

export function hybridInstruments(meter: Meter): HybridInstruments {
  return {
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
    syncs: meter.createHistogram('tollgate.hybrid.sync.duration', {
      description: 'time each HybridStore sync took, failed syncs included',
      unit: 's',
      advice: { explicitBucketBoundaries: SYNC_BUCKETS },
    }),
  }
}
