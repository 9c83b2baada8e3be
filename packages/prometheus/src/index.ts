export type { PrometheusMetrics, PrometheusMetricsOptions } from './prometheus-metrics.js'
export { prometheusMetrics } from './prometheus-metrics.js'
