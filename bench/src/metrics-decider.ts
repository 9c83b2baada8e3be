import { createLimiter, type DecisionObserver, type Limiter, MemoryStore, type Rule } from '@tollgate/core'
import { openTelemetryMetrics } from '@tollgate/opentelemetry'
import { prometheusMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
import { LIMIT_NEVER_REACHED, PERIOD_MS } from './config.js'
import type { Decider } from './contenders/contender.js'

/**
 * - `prometheus`: `prometheusMetrics(limiter, { registry })`, defaults otherwise (one decision
 *   in 100 timed);
 * - `opentelemetry`: `openTelemetryMetrics(limiter)` on the global no-op MeterProvider, span
 *   attributes on and no active span: the observer's own cost, not an SDK's.
 */
export const METRICS_VARIANTS = ['prometheus', 'opentelemetry'] as const
export type MetricsVariant = (typeof METRICS_VARIANTS)[number]

/**
 * What a turn of decisions runs with: no observer, an observer that does nothing (what the
 * limiter's call to any observer costs), or the observer the variant's metrics attached.
 */
export const OBSERVED_STATES = ['detached', 'empty', 'metrics'] as const
export type ObservedState = (typeof OBSERVED_STATES)[number]

export interface MetricsDecider extends Decider {
  /** The observer the variant attached, and the limiter's rules decisions take in turn. */
  readonly observer: DecisionObserver
  readonly rules: readonly Rule[]
  readonly limiter: Limiter
  /** Attaches the state's observer, the other detached. */
  use(state: ObservedState): void
}

/** An observer that does nothing. */
export const EMPTY_OBSERVER: DecisionObserver = { timeEvery: 0, decided() {}, storeFailed() {} }

/**
 * An in-process limiter (fixed window, 1 window) of `rules` rules that decisions take in turn,
 * with the variant's metrics, whose observer turns detach, or swap for one that does nothing.
 */
export function metricsDecider(variant: MetricsVariant, rules: number): MetricsDecider {
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
  // The package attaches its observer once; turns detach and attach that same observer, so that
  // its counts, and their place on each rule, are made once, as in an application.
  const observe = limiter.observe.bind(limiter)
  let observer: DecisionObserver | undefined
  let detach: (() => void) | undefined
  limiter.observe = (made) => {
    observer = made
    detach = observe(made)
    return () => {
      detach?.()
      detach = undefined
    }
  }
  const metrics =
    variant === 'prometheus' ? prometheusMetrics(limiter, { registry: new Registry() }) : openTelemetryMetrics(limiter)
  if (observer === undefined) throw new Error(`${variant} attached no observer`)
  const attached = observer
  let turn = 0
  return {
    observer: attached,
    limiter,
    rules: names.map((name) => limiter.rules.get(name) as Rule),
    async decide(identifiers) {
      const decision = await limiter.consume(names[turn++ % rules] as string, identifiers)
      if (decision.error) throw decision.error
      return decision.allowed
    },
    use(state) {
      detach?.()
      detach = state === 'detached' ? undefined : observe(state === 'empty' ? EMPTY_OBSERVER : attached)
    },
    async teardown() {
      metrics.close()
      await limiter.close()
    },
  }
}
