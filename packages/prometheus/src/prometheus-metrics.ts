import {
  type BreakerState,
  checkOptionsObject,
  DECISION_OUTCOMES,
  DecisionCounts,
  type DecisionCountsOptions,
  type HybridStoreView,
  hybridStoreOf,
  type Limiter,
  onRulesEvents,
  optionKeys,
  type RuleCounts,
  STORE_ERROR_KINDS,
  TollgateConfigError,
} from '@tollgate/core'
import { Counter, Gauge, Histogram, type Registry, register } from 'prom-client'
import { CountedHistogram } from './counted-histogram.js'

export interface PrometheusMetricsOptions extends DecisionCountsOptions {
  /**
   * Where the metrics are registered.
   * @default prom-client's global registry (`register`)
   * @example { registry: new Registry() }
   */
  registry?: Registry
}

export interface PrometheusMetrics {
  /** What the metrics read: the limiter's decisions counted as they are made. */
  readonly counts: DecisionCounts
  /** Detaches from the limiter and its store and removes the metrics from the registry. */
  close(): void
}

/** `tollgate_breaker_state`'s value is the state's index here. */
const BREAKER_STATES: readonly BreakerState[] = ['closed', 'half-open', 'open']

/** A sync pushes and pulls a few hundred keys per script call, one call per chunk. */
const SYNC_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

const DECISION_NAMES = [
  'tollgate_decisions_total',
  'tollgate_window_denials_total',
  'tollgate_cost_units_total',
  'tollgate_decision_duration_seconds',
  'tollgate_store_errors_total',
  'tollgate_breaker_state',
  'tollgate_rules_epoch',
  'tollgate_rules_reloads_total',
]
const HYBRID_NAMES = [
  'tollgate_hybrid_sync_duration_seconds',
  'tollgate_hybrid_staleness_seconds',
  'tollgate_hybrid_tracked_keys',
  'tollgate_hybrid_overadmitted_units_total',
  'tollgate_hybrid_lease_round_trips_total',
]

const OPTION_KEYS = optionKeys<PrometheusMetricsOptions>({
  registry: true,
  maxRules: true,
  timeEvery: true,
  durationBuckets: true,
})

/**
 * Registers the limiter's metrics with prom-client. Decisions are counted by the limiter as they
 * are made, in arrays allocated once per rule; prom-client reads them when the registry is
 * scraped. Rule labels are bounded by `maxRules`; identifiers are never labels.
 * @example
 * const metrics = prometheusMetrics(limiter, { registry })
 * app.get('/metrics', async (_req, res) => { res.type(registry.contentType).send(await registry.metrics()) })
 */
export function prometheusMetrics(limiter: Limiter, options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const { registry = register, ...countsOptions } = checkedOptions(limiter, options)
  const hybrid = hybridStoreOf(limiter.store)
  const names = hybrid ? [...DECISION_NAMES, ...HYBRID_NAMES] : DECISION_NAMES
  const taken = names.find((name) => registry.getSingleMetric(name) !== undefined)
  if (taken !== undefined) {
    throw new TollgateConfigError(
      `prometheusMetrics: the registry already holds ${taken}; each limiter needs a registry of its own (option registry), or close() the metrics registered before`,
    )
  }
  const counts = new DecisionCounts(countsOptions)
  const registers = [registry]

  new Counter({
    name: 'tollgate_decisions_total',
    help: 'consume decisions, by rule asked and outcome',
    labelNames: ['rule', 'outcome'],
    registers,
    collect() {
      setByOutcome(this, counts.rules(), (rule) => rule.decisions)
    },
  })
  new Counter({
    name: 'tollgate_cost_units_total',
    help: 'units consume decisions asked for (their cost), by rule asked and outcome',
    labelNames: ['rule', 'outcome'],
    registers,
    collect() {
      setByOutcome(this, counts.rules(), (rule) => rule.units)
    },
  })
  new Counter({
    name: 'tollgate_window_denials_total',
    help: "decisions a window refused or shed (or would have, in dry run), by the window's rule and period",
    labelNames: ['rule', 'window'],
    registers,
    collect() {
      this.reset()
      for (const rule of counts.rules()) {
        for (const window of rule.windows) this.inc({ rule: rule.rule, window: window.window }, window.denials)
      }
    },
  })
  new CountedHistogram(
    'tollgate_decision_duration_seconds',
    counts.timeEvery > 0
      ? `time from asking the store to the decision, of one consume decision in ${counts.timeEvery} (sampled)`
      : 'time from asking the store to the decision (not measured: timeEvery is 0)',
    counts.durations,
  ).registerIn(registry)
  new Counter({
    name: 'tollgate_store_errors_total',
    help: 'store failures, by kind: timeout, unavailable, key, breaker_open, sync',
    labelNames: ['kind'],
    registers,
    collect() {
      this.reset()
      for (const kind of STORE_ERROR_KINDS) this.inc({ kind }, counts.storeErrors[kind])
    },
  })
  new Gauge({
    name: 'tollgate_breaker_state',
    help: "the store's circuit breaker: 0 closed, 1 half-open, 2 open",
    registers,
    collect() {
      this.set(BREAKER_STATES.indexOf(limiter.breakerState))
    },
  })
  const epoch = new Gauge({
    name: 'tollgate_rules_epoch',
    help: 'the epoch of the rules in force (rules that change at run time); 0 until a set of rules is applied',
    registers,
  })
  const reloads = new Counter({
    name: 'tollgate_rules_reloads_total',
    help: 'sets of rules offered at run time, by result: applied or rejected',
    labelNames: ['result'],
    registers,
  })
  reloads.inc({ result: 'applied' }, 0)
  reloads.inc({ result: 'rejected' }, 0)
  const stopRules = onRulesEvents(limiter, {
    applied(value) {
      reloads.inc({ result: 'applied' })
      if (value !== undefined) epoch.set(value)
    },
    rejected: () => reloads.inc({ result: 'rejected' }),
  })
  const stopHybrid = hybrid ? hybridMetrics(hybrid, counts, registers) : () => {}
  const detach = limiter.observe(counts)

  let closed = false
  return {
    counts,
    close() {
      if (closed) return
      closed = true
      detach()
      stopRules()
      stopHybrid()
      for (const name of names) registry.removeSingleMetric(name)
    },
  }
}

/** Registers the HybridStore's metrics; returns the function that stops listening to its syncs. */
function hybridMetrics(store: HybridStoreView, counts: DecisionCounts, registers: Registry[]): () => void {
  const syncs = new Histogram({
    name: 'tollgate_hybrid_sync_duration_seconds',
    help: 'time each HybridStore sync took, failed syncs included',
    buckets: SYNC_BUCKETS,
    registers,
  })
  new Gauge({
    name: 'tollgate_hybrid_staleness_seconds',
    help: 'time since the last HybridStore sync that reached Redis (since the store started, before the first)',
    registers,
    collect() {
      this.set(store.stats().stalenessMs / 1000)
    },
  })
  new Gauge({
    name: 'tollgate_hybrid_tracked_keys',
    help: 'keys the HybridStore tracks in this process',
    registers,
    collect() {
      this.set(store.stats().trackedKeys)
    },
  })
  new Counter({
    name: 'tollgate_hybrid_overadmitted_units_total',
    help: "units this process pushed above a window's limit at its syncs, by rule",
    labelNames: ['rule'],
    registers,
    collect() {
      setByRule(this, counts, store.stats().overAdmittedByRule)
    },
  })
  new Counter({
    name: 'tollgate_hybrid_lease_round_trips_total',
    help: 'round trips to Redis for leases of strict rules, by rule',
    labelNames: ['rule'],
    registers,
    collect() {
      setByRule(this, counts, store.stats().leaseRoundTripsByRule)
    },
  })
  const synced = (report: { durationMs: number; error?: unknown }) => {
    syncs.observe(report.durationMs / 1000)
    if (report.error !== undefined) counts.storeFailed('sync')
  }
  store.on('sync', synced)
  return () => store.off('sync', synced)
}

function setByOutcome(
  counter: Counter<'rule' | 'outcome'>,
  rules: Iterable<RuleCounts>,
  valuesOf: (rule: RuleCounts) => Float64Array,
): void {
  counter.reset()
  for (const rule of rules) {
    const values = valuesOf(rule)
    DECISION_OUTCOMES.forEach((outcome, i) => {
      counter.inc({ rule: rule.rule, outcome }, values[i] as number)
    })
  }
}

/** Per rule label (every one decided on, at 0 when absent from `values`), the values summed. */
function setByRule(counter: Counter<'rule'>, counts: DecisionCounts, values: Iterable<[string, number]>): void {
  const totals = counts.totalsByRule(values)
  counter.reset()
  for (const [rule, value] of totals) counter.inc({ rule }, value)
}

function checkedOptions(limiter: Limiter, options: PrometheusMetricsOptions): PrometheusMetricsOptions {
  if (typeof (limiter as Partial<Limiter> | null)?.observe !== 'function') {
    throw new TollgateConfigError(
      'prometheusMetrics takes a limiter made by createLimiter of @tollgate/core (one with observe()) as its first argument',
    )
  }
  const { registry } = checkOptionsObject(options, OPTION_KEYS, 'prometheusMetrics')
  if (
    registry !== undefined &&
    (typeof (registry as Partial<Registry> | null)?.getSingleMetric !== 'function' ||
      typeof (registry as Partial<Registry>).registerMetric !== 'function')
  ) {
    throw new TollgateConfigError(
      'prometheusMetrics option registry must be a prom-client Registry, such as new Registry() or the global register',
    )
  }
  return options
}
