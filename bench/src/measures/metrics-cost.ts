import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { METRICS_VARIANTS, type MetricsVariant } from '../metrics-decider.js'
import { rotate } from '../stats.js'
import type { MeasureContext } from './context.js'

/** One rule, whose counts the observer finds from the last decision's, and 8 rules in turn, each found by its rule. */
export const METRICS_RULE_COUNTS = [1, 8] as const

/** The callers each await their decision before the next, as in section 1 at 256 in flight. */
export const METRICS_IN_FLIGHT = 256

export interface MetricsCostCell {
  variant: MetricsVariant
  rules: number
  /** The variant's process's CPU time per decision, ns, per repetition. */
  cpuNsPerDecision: number[]
  /** Wall time per decision, ns, per repetition. */
  nsPerDecision: number[]
  decisions: number
  errors: number
  firstError?: string
}

interface Run {
  decisions: number
  errors: number
  seconds: number
  cpuSeconds: number
  firstError?: string
}

export function metricsCostUnits(config: BenchConfig): number {
  return METRICS_RULE_COUNTS.length * (1 + config.metrics.repetitions)
}

/**
 * Measure 7: what attaching metrics costs an in-process decision. The same MemoryStore limiter
 * (fixed window, 1 window × 1 identifier over 10,000 identifiers) without metrics and with each
 * package attached, each in a process of its own, measured in turns of `measureMs` rotated each
 * repetition; the cost is the difference in CPU time per decision against `none` within each
 * repetition, which a machine busy with other work disturbs less than wall time.
 */
export async function measureMetricsCost(context: MeasureContext): Promise<MetricsCostCell[]> {
  const { config, progress } = context
  const { warmupMs, measureMs, repetitions } = config.metrics
  const phase = progress.phase('metrics cost', metricsCostUnits(config))
  const cells: MetricsCostCell[] = []
  for (const rules of METRICS_RULE_COUNTS) {
    const where = `${rules} rule${rules === 1 ? '' : 's'}`
    phase.note(`warm-up (${where})`)
    const workers = new Map(
      METRICS_VARIANTS.map((variant) => [
        variant,
        new LineChild('metrics-cost-worker.ts', [variant, String(rules), String(METRICS_IN_FLIGHT)]),
      ]),
    )
    const byVariant = new Map<MetricsVariant, MetricsCostCell>()
    try {
      for (const [variant, worker] of workers) {
        await worker.receive<{ ready: true }>()
        await worker.request<Run>(String(warmupMs))
        const cell: MetricsCostCell = {
          variant,
          rules,
          cpuNsPerDecision: [],
          nsPerDecision: [],
          decisions: 0,
          errors: 0,
        }
        byVariant.set(variant, cell)
        cells.push(cell)
      }
      phase.tick()
      for (let rep = 0; rep < repetitions; rep++) {
        phase.note(`${where} rep ${rep + 1}`)
        for (const variant of rotate(METRICS_VARIANTS, rep)) {
          const run = await (workers.get(variant) as LineChild).request<Run>(String(measureMs))
          const cell = byVariant.get(variant) as MetricsCostCell
          const decisions = Math.max(1, run.decisions)
          cell.cpuNsPerDecision.push((run.cpuSeconds * 1e9) / decisions)
          cell.nsPerDecision.push((run.seconds * 1e9) / decisions)
          cell.decisions += run.decisions
          cell.errors += run.errors
          if (run.firstError !== undefined && cell.firstError === undefined) cell.firstError = run.firstError
        }
        phase.tick()
      }
    } finally {
      await Promise.all([...workers.values()].map((worker) => worker.close()))
    }
  }
  phase.done()
  return cells
}

/** Per repetition, the variant's CPU ns per decision less `none`'s in the same repetition. */
export function costsOf(cells: readonly MetricsCostCell[], variant: MetricsVariant, rules: number): number[] {
  const base = cells.find((cell) => cell.variant === 'none' && cell.rules === rules)
  const cell = cells.find((c) => c.variant === variant && c.rules === rules)
  if (!base || !cell) return []
  return cell.cpuNsPerDecision.map((ns, rep) => ns - (base.cpuNsPerDecision[rep] as number))
}
