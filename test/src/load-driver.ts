import { setTimeout as delay } from 'node:timers/promises'
import type { Decision, DecisionReason } from '@tollgate/core'

export interface LoadOptions {
  /** Callers deciding concurrently, each one decision at a time. */
  callers: number
  /** One decision; `iteration` counts this caller's decisions from 0. */
  decide: (caller: number, iteration: number) => Promise<Decision>
  /** The load stops after this many decisions in all, even if never stopped. */
  maxDecisions: number
  /** The load stops this many milliseconds after it started, even if never stopped. */
  maxDurationMs: number
  /**
   * Milliseconds each caller waits between its decisions, so that the load is steady rather than
   * as fast as the event loop goes, which on a small machine would measure CPU starvation.
   * @default 10
   */
  pauseMs?: number
}

/** One decision. Times are milliseconds since the load started. */
export interface LoadSample {
  caller: number
  startMs: number
  endMs: number
  latencyMs: number
  /** Undefined when the decision threw or rejected, which a decision must never do. */
  decision?: Decision
  thrown?: unknown
}

export interface LoadMark {
  label: string
  atMs: number
}

/** A time the event loop was blocked: from `atMs - lagMs` to `atMs`. */
export interface LoopLag {
  atMs: number
  lagMs: number
}

export interface LoadReport {
  samples: readonly LoadSample[]
  marks: readonly LoadMark[]
  /** Decisions still unsettled when the load stopped and its grace ran out: hung. */
  pending: ReadonlyArray<{ caller: number; startMs: number }>
  /** Every time the event loop ran a 10 ms tick more than 20 ms late. */
  loopLags: readonly LoopLag[]
}

export interface LoadRun {
  /** Milliseconds since the load started. */
  now(): number
  /** Records an event (a signal sent, a breaker change) on the load's timeline; returns its time. */
  mark(label: string): number
  /** Every settled decision so far, in the order they settled. */
  readonly samples: readonly LoadSample[]
  /** The decisions in flight now, one per caller at most. */
  pending(): Array<{ caller: number; startMs: number }>
  /**
   * Stops the callers and waits up to graceMs for the decisions in flight; those still unsettled
   * are reported as pending instead of holding the test.
   */
  stop(graceMs?: number): Promise<LoadReport>
}

export interface LoadSummary {
  decisions: number
  byReason: Partial<Record<DecisionReason | 'thrown', number>>
  maxLatencyMs: number
  p99LatencyMs: number
}

const DEFAULT_PAUSE_MS = 10
const DEFAULT_GRACE_MS = 2_000
const LAG_TICK_MS = 10
const LAG_RECORDED_MS = 20

/** Starts `callers` loops of decisions; they run until stop(), maxDecisions or maxDurationMs. */
export function startLoad(options: LoadOptions): LoadRun {
  const { callers, decide, maxDecisions, maxDurationMs, pauseMs = DEFAULT_PAUSE_MS } = options
  const origin = performance.now()
  const now = () => performance.now() - origin
  const samples: LoadSample[] = []
  const marks: LoadMark[] = []
  const inFlight = new Map<number, number>()
  // A decision's own timer cannot fire while the event loop is blocked (by the machine not
  // scheduling this process, or by a long GC), so its latency can exceed its bound by that much.
  const loopLags: LoopLag[] = []
  let lastTick = now()
  const lagTimer = setInterval(() => {
    const atMs = now()
    const lagMs = atMs - lastTick - LAG_TICK_MS
    if (lagMs > LAG_RECORDED_MS) loopLags.push({ atMs, lagMs })
    lastTick = atMs
  }, LAG_TICK_MS)
  let started = 0
  let stopped = false
  const running = () => !stopped && started < maxDecisions && now() < maxDurationMs

  async function loop(caller: number): Promise<void> {
    for (let iteration = 0; running(); iteration++) {
      started++
      const startMs = now()
      inFlight.set(caller, startMs)
      let decision: Decision | undefined
      let thrown: unknown
      let threw = false
      try {
        decision = await decide(caller, iteration)
      } catch (error) {
        threw = true
        thrown = error
      }
      inFlight.delete(caller)
      const endMs = now()
      const sample: LoadSample = { caller, startMs, endMs, latencyMs: endMs - startMs }
      if (threw) sample.thrown = thrown
      else sample.decision = decision
      samples.push(sample)
      if (pauseMs > 0 && running()) await delay(pauseMs)
    }
  }

  const loops = Promise.all(Array.from({ length: callers }, (_, caller) => loop(caller)))
  // Also when the load ends on its own, at maxDecisions or maxDurationMs.
  void loops.then(() => clearInterval(lagTimer))
  return {
    now,
    mark(label) {
      const atMs = now()
      marks.push({ label, atMs })
      return atMs
    },
    samples,
    pending: () => [...inFlight].map(([caller, startMs]) => ({ caller, startMs })),
    async stop(graceMs = DEFAULT_GRACE_MS) {
      stopped = true
      let timer: NodeJS.Timeout | undefined
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs)
      })
      await Promise.race([loops, grace])
      clearTimeout(timer)
      clearInterval(lagTimer)
      const pending = [...inFlight].map(([caller, startMs]) => ({ caller, startMs }))
      return { samples: [...samples], marks: [...marks], pending, loopLags: [...loopLags] }
    },
  }
}

/** How long in all the event loop was measurably blocked within [fromMs, toMs]. */
export function loopBlockedWithin(report: LoadReport, fromMs: number, toMs: number): number {
  let blocked = 0
  for (const { atMs, lagMs } of report.loopLags) {
    blocked += Math.max(0, Math.min(atMs, toMs) - Math.max(atMs - lagMs, fromMs))
  }
  return blocked
}

/**
 * The decisions that took longer than boundMs plus the time the event loop was blocked during
 * them: the lateness the limiter, not the machine, is answerable for.
 */
export function lateBeyondLoopLag(report: LoadReport, boundMs: number): LoadSample[] {
  return report.samples.filter((s) => s.latencyMs > boundMs + loopBlockedWithin(report, s.startMs, s.endMs))
}

export function reasonOf(sample: LoadSample): DecisionReason | 'thrown' {
  return sample.decision?.reason ?? 'thrown'
}

/** Whether the store itself answered: a real pass or a real refusal, not a fallback. */
export function storeAnswered(sample: LoadSample): boolean {
  const reason = reasonOf(sample)
  return reason === 'ok' || reason === 'limited'
}

export function summarize(samples: readonly LoadSample[]): LoadSummary {
  const byReason: LoadSummary['byReason'] = {}
  for (const sample of samples) {
    const reason = reasonOf(sample)
    byReason[reason] = (byReason[reason] ?? 0) + 1
  }
  const latencies = samples.map((sample) => sample.latencyMs).sort((a, b) => a - b)
  const p99Index = Math.max(0, Math.ceil(latencies.length * 0.99) - 1)
  return {
    decisions: samples.length,
    byReason,
    maxLatencyMs: latencies.at(-1) ?? 0,
    p99LatencyMs: latencies[p99Index] ?? 0,
  }
}

export function maxLoopLag(report: LoadReport): number {
  return Math.max(0, ...report.loopLags.map((lag) => lag.lagMs))
}

export function formatSummary(summary: LoadSummary): string {
  const reasons = Object.entries(summary.byReason)
    .map(([reason, count]) => `${reason}:${count}`)
    .join(' ')
  return (
    `decisions=${summary.decisions} [${reasons}] ` +
    `max=${summary.maxLatencyMs.toFixed(1)}ms p99=${summary.p99LatencyMs.toFixed(1)}ms`
  )
}

/**
 * Reasons per bucket of decision start times, with the marks in place: what a failing assertion
 * shows so that the run can be read without re-running it.
 * @example '0ms ok:412 | 250ms ok:398 | SIGSTOP@512ms | 500ms ok:120 store-error-allowed:301 | …'
 */
export function timeline(report: LoadReport, bucketMs = 250): string {
  const buckets = new Map<number, LoadSample[]>()
  for (const sample of report.samples) {
    const bucket = Math.floor(sample.startMs / bucketMs) * bucketMs
    const list = buckets.get(bucket)
    if (list) list.push(sample)
    else buckets.set(bucket, [sample])
  }
  const entries: Array<{ atMs: number; text: string }> = [
    ...[...buckets].map(([atMs, samples]) => {
      const { byReason, maxLatencyMs } = summarize(samples)
      const reasons = Object.entries(byReason).map(([reason, count]) => `${reason}:${count}`)
      return { atMs, text: `${atMs}ms ${reasons.join(' ')} max=${maxLatencyMs.toFixed(0)}ms` }
    }),
    ...report.marks.map((mark) => ({ atMs: mark.atMs, text: `${mark.label}@${mark.atMs.toFixed(0)}ms` })),
  ]
  return entries
    .sort((a, b) => a.atMs - b.atMs)
    .map((entry) => entry.text)
    .join(' | ')
}
