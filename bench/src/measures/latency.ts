import { type BenchConfig, LIMIT_NEVER_REACHED, PERIOD_MS } from '../config.js'
import type { Decider } from '../contenders/contender.js'
import { IN_PROCESS_CONTENDERS } from '../contenders/index.js'
import { rotate } from '../stats.js'
import { identifiersOf } from '../workload.js'
import type { MeasureContext } from './context.js'

export interface LatencyCell {
  contender: string
  /** Per repetition, µs. */
  p50Us: number[]
  p99Us: number[]
  /** The timer read around a decision that does nothing, per repetition, µs: part of every sample. */
  timerP50Us: number[]
  decisions: number
  errors: number
  firstError?: string
}

export function latencyUnits(config: BenchConfig): number {
  return IN_PROCESS_CONTENDERS.length * (1 + config.latency.repetitions)
}

const NOTHING: Decider = { decide: () => Promise.resolve(true), teardown: () => Promise.resolve() }

/**
 * The time of each of `count` decisions made one at a time, each awaited before the next, in ns:
 * from the call to the continuation after its `await`, as an application's request handler sees it.
 */
async function timeEach(
  decider: Decider,
  ids: (i: number) => readonly string[],
  count: number,
): Promise<{ samples: Float64Array; errors: number; firstError: unknown }> {
  const samples = new Float64Array(count)
  let errors = 0
  let firstError: unknown
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint()
    try {
      await decider.decide(ids(i))
    } catch (error) {
      errors++
      firstError ??= error
    }
    samples[i] = Number(process.hrtime.bigint() - start)
  }
  return { samples, errors, firstError }
}

function quantileUs(sorted: Float64Array, q: number): number {
  return (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number) / 1000
}

/**
 * Measure 6: the latency of one in-process decision, 1 window × 1 identifier over 10,000
 * identifiers, one decision in flight. Each contender is warmed up once, then measured
 * `repetitions` times in an order rotated each repetition; each repetition also times a decision
 * that does nothing, the timer's own share of every sample.
 */
export async function measureLatency(context: MeasureContext): Promise<LatencyCell[]> {
  const { config, progress } = context
  const { warmupDecisions, decisions, repetitions } = config.latency
  const phase = progress.phase('latency', latencyUnits(config))
  const ids = identifiersOf('one-window', 'many')
  const deciders = new Map<string, Decider>()
  const cells = new Map<string, LatencyCell>()
  for (const contender of IN_PROCESS_CONTENDERS) {
    const decider = await contender.setup({
      client: contender.syncsWithRedis ? context.client : undefined,
      shape: 'one-window',
      limit: LIMIT_NEVER_REACHED,
      periodMs: PERIOD_MS,
    })
    deciders.set(contender.id, decider)
    cells.set(contender.id, { contender: contender.id, p50Us: [], p99Us: [], timerP50Us: [], decisions: 0, errors: 0 })
    phase.note(`warm-up ${contender.id}`)
    await timeEach(decider, ids, warmupDecisions)
    await decider.settle?.()
    phase.tick()
  }
  try {
    for (let rep = 0; rep < repetitions; rep++) {
      for (const contender of rotate(IN_PROCESS_CONTENDERS, rep)) {
        phase.note(`${contender.id} rep ${rep + 1}`)
        const cell = cells.get(contender.id) as LatencyCell
        const timer = (await timeEach(NOTHING, ids, decisions)).samples.sort()
        const decider = deciders.get(contender.id) as Decider
        const run = await timeEach(decider, ids, decisions)
        await decider.settle?.()
        const sorted = run.samples.sort()
        cell.p50Us.push(quantileUs(sorted, 0.5))
        cell.p99Us.push(quantileUs(sorted, 0.99))
        cell.timerP50Us.push(quantileUs(timer, 0.5))
        cell.decisions += decisions
        cell.errors += run.errors
        if (run.firstError !== undefined && cell.firstError === undefined) cell.firstError = String(run.firstError)
        phase.tick()
      }
    }
  } finally {
    for (const decider of deciders.values()) await decider.teardown()
  }
  phase.done()
  return [...cells.values()]
}
