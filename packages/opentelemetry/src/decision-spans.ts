import { type Attributes, type Histogram, trace } from '@opentelemetry/api'
import type { Decision, DecisionCounts, DecisionObserver, Rule, StoreErrorKind } from '@tollgate/core'
import { decisionOutcome } from '@tollgate/core'

/** The attributes a decision sets on the active span, and its metrics carry. */
export const RULE = 'tollgate.rate_limiting.rule'
export const RESULT = 'tollgate.rate_limiting.result'
export const RETRY_AFTER = 'tollgate.rate_limiting.retry_after'

/**
 * What the limiter shows each decision to: the counts the observable instruments read, the
 * duration histogram for the decisions the limiter timed, and the active span's attributes.
 */
export class DecisionSpans implements DecisionObserver {
  readonly timeEvery: number

  constructor(
    private readonly counts: DecisionCounts,
    private readonly durations: Histogram,
    private readonly spans: boolean,
    /** What the limiter's durations carry: its name, when it has one. */
    private readonly attributes: Attributes,
  ) {
    this.timeEvery = counts.timeEvery
  }

  decided(rule: Rule, decision: Decision): void {
    this.counts.decided(rule, decision)
    if (!this.spans) return
    // Only the span already there: an in-process decision takes microseconds, a span of its own would cost more.
    const span = trace.getActiveSpan()
    if (span === undefined || !span.isRecording()) return
    span.setAttribute(RULE, decision.rule)
    span.setAttribute(RESULT, decisionOutcome(decision.reason))
    if (Number.isFinite(decision.retryAfterMs)) span.setAttribute(RETRY_AFTER, decision.retryAfterMs / 1000)
  }

  timed(seconds: number): void {
    this.counts.timed(seconds)
    this.durations.record(seconds, this.attributes)
  }

  storeFailed(kind: StoreErrorKind): void {
    this.counts.storeFailed(kind)
  }
}
