export {
  RESULT as RESULT_ATTRIBUTE,
  RETRY_AFTER as RETRY_AFTER_ATTRIBUTE,
  RULE as RULE_ATTRIBUTE,
} from './decision-spans.js'
export { LIMITER_NAME as LIMITER_NAME_ATTRIBUTE } from './metric-attributes.js'
export type { OpenTelemetryMetrics, OpenTelemetryMetricsOptions } from './opentelemetry-metrics.js'
export { METER_NAME, openTelemetryMetrics } from './opentelemetry-metrics.js'
