import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { METRICS_VARIANTS, type MetricsVariant } from '../metrics-decider.js'
import type { MeasureContext } from './context.js'

/** One rule, and 8 rules that decisions take in turn, so that each finds its rule's counts anew. */
export const METRICS_RULE_COUNTS = [1, 8] as const

/** The callers each await their decision before the next, as in section 1 at 256 in flight. */
export const METRICS_IN_FLIGHT = 256

/** The observer timed alone (metrics-cost-worker.ts): decisions shown to it, passes over them, rounds (the lowest kept). */
export const ISOLATED = { decisions: 10_000, passes: 100, rounds: 7 } as const

export interface MetricsCostCell {
  variant: MetricsVariant
  rules: number
  /** Wall ns per decision of each turn with the metrics' observer detached, in pair order. */
  withoutNs: number[]
  /** Wall ns per decision of each turn with it attached, in pair order. */
  withNs: number[]
  /** The observer's own ns per decision shown to it, measured alone (`metrics-cost-worker.ts`). */
  isolatedNs: number
  errors: number
  firstError?: string
}

interface Answer {
  without: number[]
  withMetrics: number[]
  isolatedNs: number
  errors: number
  firstError?: string
}

export function metricsCostUnits(_config: BenchConfig): number {
  return METRICS_RULE_COUNTS.length * METRICS_VARIANTS.length
}

/**
 * Measure 7: what attaching metrics costs an in-process decision. Per variant and rule count, one
 * MemoryStore limiter (fixed window, 1 window × 1 identifier over 10,000 identifiers) in a
 * process of its own decides in turns of `perTurn` decisions, the observer its metrics attached
 * detached for one turn and attached again for the next, `pairs` times after `warmupPairs`. A
 * difference of a few ns in a decision of several hundred is below what runs of seconds tell
 * apart on a shared machine, and two limiters, or two processes, running the same code differ by
 * tens of ns: one limiter's turns milliseconds apart see the same machine, store and compiled
 * code, and the median over the pairs of their difference is the cost. That difference still
 * carries a bias of its own, of the order of the budget: the `empty` variant, an observer that does
 * nothing, reads it. So each worker also times its observer alone (`isolatedNs`): real decisions
 * handed to it in a loop, less the same loop handing them to a function that does nothing.
 */
export async function measureMetricsCost(context: MeasureContext): Promise<MetricsCostCell[]> {
  const { config, progress } = context
  const { warmupPairs, pairs, perTurn } = config.metrics
  const phase = progress.phase('metrics cost', metricsCostUnits(config))
  const cells: MetricsCostCell[] = []
  for (const rules of METRICS_RULE_COUNTS) {
    for (const variant of METRICS_VARIANTS) {
      phase.note(`${variant}, ${rules} rule${rules === 1 ? '' : 's'}`)
      const worker = new LineChild('metrics-cost-worker.ts', [
        variant,
        String(rules),
        String(METRICS_IN_FLIGHT),
        String(perTurn),
      ])
      try {
        await worker.receive<{ ready: true }>()
        const answer = await worker.request<Answer>(`${warmupPairs} ${pairs}`)
        const cell: MetricsCostCell = {
          variant,
          rules,
          withoutNs: answer.without,
          withNs: answer.withMetrics,
          isolatedNs: answer.isolatedNs,
          errors: answer.errors,
        }
        if (answer.firstError !== undefined) cell.firstError = answer.firstError
        cells.push(cell)
      } finally {
        await worker.close()
      }
      phase.tick()
    }
  }
  phase.done()
  return cells
}

/** Per pair, ns per decision with the metrics less without. */
export function costsOf(cell: MetricsCostCell): number[] {
  return cell.withNs.map((ns, i) => ns - (cell.withoutNs[i] as number))
}
