import { type MeterProvider, metrics } from '@opentelemetry/api'
import {
  checkOptionsObject,
  DecisionCounts,
  type DecisionCountsOptions,
  describeValue,
  type Limiter,
  optionKeys,
  TollgateConfigError,
} from '@tollgate/core'
import { MeterLimiters } from './meter-limiters.js'

export interface OpenTelemetryMetricsOptions extends DecisionCountsOptions {
  /**
   * Where the instruments are made.
   * @default the global MeterProvider (`metrics.getMeterProvider()`)
   * @example { meterProvider: new MeterProvider({ readers: [reader] }) }
   */
  meterProvider?: MeterProvider
  /**
   * Tells this limiter's data points apart from those of other limiters on the same
   * MeterProvider: every one carries it as `tollgate.limiter.name`. Without it, limiters that
   * share a MeterProvider are reported together: counts summed, the breaker state and the rules
   * epoch at their highest.
   * @default none: no `tollgate.limiter.name`
   * @example { limiterName: 'login' }
   */
  limiterName?: string
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
  /**
   * Detaches from the limiter and its store: what the limiter added to the instruments is taken
   * out, and the observable instruments' callback stops once no limiter is left on the meter.
   */
  close(): void
}

/** The meter's name, as instrumentation scopes are named: the package's. */
export const METER_NAME = '@tollgate/opentelemetry'

const OPTION_KEYS = optionKeys<OpenTelemetryMetricsOptions>({
  meterProvider: true,
  limiterName: true,
  spanAttributes: true,
  maxRules: true,
  timeEvery: true,
  durationBuckets: true,
})

/**
 * Reports the limiter's decisions as OpenTelemetry instruments, through `@opentelemetry/api`
 * only. Decisions are counted by the limiter as they are made; the observable instruments read
 * those counts when the SDK collects. Rule attributes are bounded by `maxRules`; identifiers are
 * never attributes. Limiters on one MeterProvider report through the same instruments, their
 * values combined per attribute set; `limiterName` tells them apart.
 * @example
 * const telemetry = openTelemetryMetrics(limiter)
 */
export function openTelemetryMetrics(
  limiter: Limiter,
  options: OpenTelemetryMetricsOptions = {},
): OpenTelemetryMetrics {
  const { meterProvider, limiterName, spanAttributes = true, ...countsOptions } = checkedOptions(limiter, options)
  const counts = new DecisionCounts(countsOptions)
  const meter = (meterProvider ?? metrics.getMeterProvider()).getMeter(METER_NAME)
  const detach = MeterLimiters.of(meter, counts).attach(limiter, { counts, limiterName, spanAttributes })

  let closed = false
  return {
    counts,
    close() {
      if (closed) return
      closed = true
      detach()
    },
  }
}

function checkedOptions(limiter: Limiter, options: OpenTelemetryMetricsOptions): OpenTelemetryMetricsOptions {
  if (typeof (limiter as Partial<Limiter> | null)?.observe !== 'function') {
    throw new TollgateConfigError(
      'openTelemetryMetrics takes a limiter made by createLimiter of @tollgate/core (one with observe()) as its first argument',
    )
  }
  const { meterProvider, limiterName, spanAttributes } = checkOptionsObject(
    options,
    OPTION_KEYS,
    'openTelemetryMetrics',
  )
  if (meterProvider !== undefined && typeof (meterProvider as Partial<MeterProvider> | null)?.getMeter !== 'function') {
    throw new TollgateConfigError(
      "openTelemetryMetrics option meterProvider must be a MeterProvider, such as the SDK's new MeterProvider({ readers })",
    )
  }
  if (limiterName !== undefined && (typeof limiterName !== 'string' || limiterName === '')) {
    throw new TollgateConfigError(
      `openTelemetryMetrics option limiterName must be a non-empty string, got ${describeValue(limiterName)}`,
    )
  }
  if (spanAttributes !== undefined && typeof spanAttributes !== 'boolean') {
    throw new TollgateConfigError(
      `openTelemetryMetrics option spanAttributes must be true or false, got ${String(spanAttributes)}`,
    )
  }
  return options
}
