import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'

/** A MeterProvider whose metrics a test collects when it wants, cumulative, as the SDK exports them. */
export class CollectedMetrics {
  readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  private readonly reader = new PeriodicExportingMetricReader({
    exporter: this.exporter,
    exportIntervalMillis: 2 ** 31 - 1,
  })
  readonly meterProvider = new MeterProvider({ readers: [this.reader] })

  /**
   * Every data point now: `name` → `attributes as JSON` → the value (a histogram's `{ count, sum }`).
   * Attribute keys in the JSON are sorted.
   */
  async collect(): Promise<Map<string, Map<string, unknown>>> {
    this.exporter.reset()
    await this.reader.forceFlush()
    const found = new Map<string, Map<string, unknown>>()
    for (const resource of this.exporter.getMetrics()) {
      for (const scope of resource.scopeMetrics) {
        for (const metric of scope.metrics) {
          const points = new Map<string, unknown>()
          for (const point of metric.dataPoints) {
            const value =
              metric.dataPointType === DataPointType.HISTOGRAM
                ? { count: (point.value as { count: number }).count, sum: (point.value as { sum: number }).sum }
                : point.value
            points.set(attributesKey(point.attributes), value)
          }
          found.set(metric.descriptor.name, points)
        }
      }
    }
    return found
  }

  shutdown(): Promise<void> {
    return this.meterProvider.shutdown()
  }
}

export function attributesKey(attributes: Record<string, unknown>): string {
  return JSON.stringify(Object.fromEntries(Object.entries(attributes).sort(([a], [b]) => a.localeCompare(b))))
}
