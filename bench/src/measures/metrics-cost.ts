import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { METRICS_VARIANTS, type MetricsVariant } from '../metrics-decider.js'
import { median } from '../stats.js'
import type { MeasureContext } from './context.js'

/** One rule, and 8 rules that decisions take in turn, so that each finds its rule's counts anew. */
export const METRICS_RULE_COUNTS = [1, 8] as const

/** The callers each await their decision before the next, as in section 1 at 256 in flight. */
export const METRICS_IN_FLIGHT = 256

/** The observer timed alone (metrics-cost-worker.ts): decisions shown to it, passes over them, rounds (the lowest kept). */
export const ISOLATED = { decisions: 10_000, passes: 100, rounds: 7 } as const

/** What one worker process measured, each a median over its rounds of three turns. */
export interface ProcessCost {
  /** Wall ns per decision of a turn with no observer attached. */
  detachedNs: number
  /** With an observer that does nothing attached. */
  emptyNs: number
  /** With the metrics' observer attached. */
  metricsNs: number
  /** Of each round, the empty observer's turn less the detached one: the limiter's call to any observer. */
  callNs: number
  /** Of each round, the metrics' turn less the detached one: attaching the metrics. */
  attachNs: number
  /** Of each round, the metrics' turn less the empty observer's: the metrics' own work on the decision path. */
  ownNs: number
  /** The observer's own ns per decision shown to it, measured alone (`metrics-cost-worker.ts`). */
  isolatedNs: number
}

export interface MetricsCostCell {
  variant: MetricsVariant
  rules: number
  /** One per worker process, in the order they ran. */
  processes: ProcessCost[]
  errors: number
  firstError?: string
}

interface Answer extends ProcessCost {
  errors: number
  firstError?: string
}

export function metricsCostUnits(config: BenchConfig): number {
  return config.metrics.processes * METRICS_RULE_COUNTS.length * METRICS_VARIANTS.length
}

/**
 * Measure 7: what metrics cost an in-process decision. Per variant and rule count, one
 * MemoryStore limiter (fixed window, 1 window × 1 identifier over 10,000 identifiers) in a
 * process of its own decides in turns of `perTurn` decisions: with no observer, with an
 * observer that does nothing, and with the observer its metrics attached, in rounds of one turn
 * each (the first rotating), `rounds` times after `warmupRounds`. A difference of a few ns in a
 * decision of several hundred is below what runs of seconds tell apart on a shared machine: one
 * limiter's turns milliseconds apart see the same machine, store and compiled code, and the
 * median over the rounds of the difference between two of its turns is the process's figure.
 * Each turn starts with a minor collection, so that no turn pays for the garbage of the turn
 * before (the observers allocate nothing; the decisions' garbage is the same in every turn).
 * Two processes running the same code differ by several ns, each compiling it its own way, so a
 * difference is only ever taken within a process: `processes` workers per cell, run in rounds of
 * every cell, and the cell's figure is the median of theirs. The metrics' own cost is their turn
 * less the empty observer's: the limiter calls any observer it is given, and that call is the
 * limiter's cost, which the turns with no observer show beside it. Each worker also times its
 * observer alone: real decisions handed to it in a loop, less the same loop handing them to an
 * observer that does nothing.
 */
export async function measureMetricsCost(context: MeasureContext): Promise<MetricsCostCell[]> {
  const { config, progress } = context
  const { processes, warmupRounds, rounds, perTurn } = config.metrics
  const phase = progress.phase('metrics cost', metricsCostUnits(config))
  const cells: MetricsCostCell[] = METRICS_RULE_COUNTS.flatMap((rules) =>
    METRICS_VARIANTS.map((variant) => ({ variant, rules, processes: [], errors: 0 })),
  )
  for (let round = 0; round < processes; round++) {
    for (const cell of cells) {
      const { variant, rules } = cell
      phase.note(`${variant}, ${rules} rule${rules === 1 ? '' : 's'}, process ${round + 1} of ${processes}`)
      const worker = new LineChild(
        'metrics-cost-worker.ts',
        [variant, String(rules), String(METRICS_IN_FLIGHT), String(perTurn)],
        ['--expose-gc'],
      )
      try {
        await worker.receive<{ ready: true }>()
        const { errors, firstError, ...cost } = await worker.request<Answer>(`${warmupRounds} ${rounds}`)
        cell.processes.push(cost)
        cell.errors += errors
        if (firstError !== undefined) cell.firstError ??= firstError
      } finally {
        await worker.close()
      }
      phase.tick()
    }
  }
  phase.done()
  return cells
}

/** The median over the cell's processes of one of their figures. */
export function medianOf(cell: MetricsCostCell, figure: keyof ProcessCost): number {
  return median(cell.processes.map((process) => process[figure]))
}
