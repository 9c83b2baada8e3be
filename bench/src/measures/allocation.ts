import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { IN_PROCESS_CONTENDERS } from '../contenders/index.js'
import type { MeasureContext } from './context.js'

export interface AllocationCell {
  contender: string
  /** Heap bytes allocated per decision, per round. */
  bytes: number[]
  /** The same for an awaited call that does nothing: the await's own share of every round. */
  nothingBytes: number[]
}

/**
 * Room for every round's garbage in the young generation, so that no collection runs during one
 * and the heap's growth is what the round allocated.
 */
export const YOUNG_GENERATION_MB = 128

export function allocationUnits(_config: BenchConfig): number {
  return IN_PROCESS_CONTENDERS.length
}

/**
 * Measure 9: heap bytes one in-process decision allocates, 1 window × 1 identifier over 10,000
 * identifiers that all hold their state already, one decision awaited at a time. Unlike time, it
 * does not move with the machine's load: the same code allocates the same bytes in every run.
 * Each contender runs in a process of its own with the collector exposed; a round collects, then
 * makes `perRound` decisions with no collection among them.
 */
export async function measureAllocation(context: MeasureContext): Promise<AllocationCell[]> {
  const { config, progress } = context
  const { perRound, rounds, warmupDecisions } = config.allocation
  const phase = progress.phase('allocation', allocationUnits(config))
  const cells: AllocationCell[] = []
  for (const contender of IN_PROCESS_CONTENDERS) {
    phase.note(contender.id)
    const worker = new LineChild(
      'allocation-worker.ts',
      [contender.id, context.redisUrl, String(perRound), String(rounds), String(warmupDecisions)],
      ['--expose-gc', `--min-semi-space-size=${YOUNG_GENERATION_MB}`, `--max-semi-space-size=${YOUNG_GENERATION_MB}`],
    )
    try {
      const answer = await worker.receive<{ bytes: number[]; nothingBytes: number[] }>()
      cells.push({ contender: contender.id, ...answer })
    } finally {
      await worker.close()
    }
    phase.tick()
  }
  phase.done()
  return cells
}
