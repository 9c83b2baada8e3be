import { createLimiter, type Limiter, MemoryStore } from '@tollgate/core'
import { openTelemetryMetrics } from '@tollgate/opentelemetry'
import { prometheusMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
import { LIMIT_NEVER_REACHED, PERIOD_MS } from './config.js'
import type { Decider } from './contenders/contender.js'

/**
 * - `none`: nothing attached;
 * - `prometheus`: `prometheusMetrics(limiter, { registry })`, defaults otherwise (one decision
 *   in 100 timed);
 * - `opentelemetry`: `openTelemetryMetrics(limiter)` on the global no-op MeterProvider, span
 *   attributes on and no active span: the observer's own cost, not an SDK's.
 */
export const METRICS_VARIANTS = ['none', 'prometheus', 'opentelemetry'] as const
export type MetricsVariant = (typeof METRICS_VARIANTS)[number]

/** An in-process limiter (fixed window, 1 window) of `rules` rules that decisions take in turn, with the variant's metrics attached. */
export function metricsDecider(variant: MetricsVariant, rules: number): Decider {
  if (!METRICS_VARIANTS.includes(variant)) throw new Error(`unknown metrics variant ${variant}`)
  const names = Array.from({ length: rules }, (_, i) => `rule${i}`)
  const limiter: Limiter = createLimiter({
    store: new MemoryStore(),
    rules: Object.fromEntries(
      names.map((name) => [
        name,
        { algorithm: 'fixed-window', windows: [{ limit: LIMIT_NEVER_REACHED, period: PERIOD_MS }] },
      ]),
    ),
    onWarning: () => {},
  })
  const metrics =
    variant === 'prometheus'
      ? prometheusMetrics(limiter, { registry: new Registry() })
      : variant === 'opentelemetry'
        ? openTelemetryMetrics(limiter)
        : undefined
  let turn = 0
  return {
    async decide(identifiers) {
      const decision = await limiter.consume(names[turn++ % rules] as string, identifiers)
      if (decision.error) throw decision.error
      return decision.allowed
    },
    async teardown() {
      metrics?.close()
      await limiter.close()
    },
  }
}
