import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { METRICS_VARIANTS, type MetricsVariant } from '../metrics-decider.js'
import { rotate } from '../stats.js'
import type { MeasureContext } from './context.js'

/** One rule, and 8 rules that decisions take in turn, so that each finds its rule's counts anew. */
export const METRICS_RULE_COUNTS = [1, 8] as const

/** The callers each await their decision before the next, as in section 1 at 256 in flight. */
export const METRICS_IN_FLIGHT = 256

export interface MetricsCostCell {
  variant: MetricsVariant
  rules: number
  /** Wall ns per decision of each turn, in turn order; the same turn of every variant of a rule count ran back to back. */
  ns: number[]
  errors: number
  firstError?: string
}

interface Turn {
  ns: number
  errors: number
  firstError?: string
}

export function metricsCostUnits(config: BenchConfig): number {
  return METRICS_RULE_COUNTS.length * (1 + Math.ceil(config.metrics.turns / 100))
}

/**
 * Measure 7: what attaching metrics costs an in-process decision. Per rule count, one
 * MemoryStore limiter (fixed window, 1 window × 1 identifier over 10,000 identifiers) per
 * variant, each in a process of its own, decides `perTurn` decisions in turns, the variants one
 * after another in an order rotated each turn. A difference of a few ns in a decision of several
 * hundred is below what runs of seconds tell apart on a shared machine; turns milliseconds apart
 * see the same machine, and the median over the turns of the difference to `none` is the cost.
 */
export async function measureMetricsCost(context: MeasureContext): Promise<MetricsCostCell[]> {
  const { config, progress } = context
  const { warmupTurns, turns, perTurn } = config.metrics
  const phase = progress.phase('metrics cost', metricsCostUnits(config))
  const cells: MetricsCostCell[] = []
  for (const rules of METRICS_RULE_COUNTS) {
    const where = `${rules} rule${rules === 1 ? '' : 's'}`
    const workers = new Map(
      METRICS_VARIANTS.map((variant) => [
        variant,
        new LineChild('metrics-cost-worker.ts', [variant, String(rules), String(METRICS_IN_FLIGHT)]),
      ]),
    )
    try {
      const byVariant = new Map<MetricsVariant, MetricsCostCell>()
      for (const [variant, worker] of workers) {
        await worker.receive<{ ready: true }>()
        const cell: MetricsCostCell = { variant, rules, ns: [], errors: 0 }
        byVariant.set(variant, cell)
        cells.push(cell)
      }
      phase.note(`warm-up (${where})`)
      for (let turn = 0; turn < warmupTurns; turn++) {
        for (const worker of workers.values()) await worker.request<Turn>(String(perTurn))
      }
      phase.tick()
      for (let turn = 0; turn < turns; turn++) {
        if (turn % 100 === 0) phase.note(`${where}, turn ${turn + 1}`)
        for (const variant of rotate(METRICS_VARIANTS, turn)) {
          const answer = await (workers.get(variant) as LineChild).request<Turn>(String(perTurn))
          const cell = byVariant.get(variant) as MetricsCostCell
          cell.ns.push(answer.ns)
          cell.errors += answer.errors
          if (answer.firstError !== undefined) cell.firstError ??= answer.firstError
        }
        if (turn % 100 === 99) phase.tick()
      }
    } finally {
      await Promise.all([...workers.values()].map((worker) => worker.close()))
    }
  }
  phase.done()
  return cells
}

/** Per turn, the variant's ns per decision less `none`'s in the same turn. */
export function costsOf(cells: readonly MetricsCostCell[], variant: MetricsVariant, rules: number): number[] {
  const base = cells.find((cell) => cell.variant === 'none' && cell.rules === rules)
  const cell = cells.find((c) => c.variant === variant && c.rules === rules)
  if (!base || !cell) return []
  return cell.ns.map((ns, turn) => ns - (base.ns[turn] as number))
}
