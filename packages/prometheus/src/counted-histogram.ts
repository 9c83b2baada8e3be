import type { DurationCounts } from '@tollgate/core'
import type { Metric, Registry } from 'prom-client'

/**
 * A histogram whose buckets the limiter has counted already: prom-client's `Histogram` takes
 * single observations only, and the decision path never calls prom-client. It gives the registry
 * what prom-client's own histograms give it (`get()`), so that text, JSON and cluster
 * aggregation read it alike. The counts are the limiter's, and `registry.resetMetrics()` leaves
 * them as they are, as it leaves every Tollgate counter.
 */
export class CountedHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly durations: DurationCounts,
  ) {}

  /** Registers it, as prom-client's metrics do with their `registers` option. */
  registerIn(registry: Registry): void {
    registry.registerMetric(this as unknown as Metric)
  }

  async get() {
    const { bounds, counts, sum, count } = this.durations
    const bucket = `${this.name}_bucket`
    const values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = []
    let below = 0
    bounds.forEach((bound, i) => {
      below += counts[i] as number
      values.push({ metricName: bucket, labels: { le: bound }, value: below })
    })
    values.push(
      { metricName: bucket, labels: { le: '+Inf' }, value: count },
      { metricName: `${this.name}_sum`, labels: {}, value: sum },
      { metricName: `${this.name}_count`, labels: {}, value: count },
    )
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  reset(): void {}
}
