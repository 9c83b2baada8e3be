import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { CONTENDERS } from '../contenders/index.js'
import type { MeasureContext } from './context.js'

export interface ExactnessCell {
  contender: string
  attempts: number
  limit: number
  admitted: number
  failed: number
}

/** Memory stores count per process, so only shared stores can be exact across processes. */
const SHARED = CONTENDERS.filter((contender) => contender.store === 'redis')
const PERIOD_MS = 3_600_000

export function exactnessUnits(_config: BenchConfig): number {
  return SHARED.length + 1
}

/** Measure 5: `processes` processes each fire `perProcess` concurrent decisions on one key whose limit is `limit`. */
export async function measureExactness(context: MeasureContext): Promise<ExactnessCell[]> {
  const { config, redisUrl, admin, progress } = context
  const { processes, perProcess, limit } = config.exactness
  const phase = progress.phase('exactness', exactnessUnits(config))
  phase.note(`starting ${processes} processes`)
  const args = [redisUrl, String(perProcess), String(limit), String(PERIOD_MS)]
  const workers = Array.from({ length: processes }, () => new LineChild('exactness-worker.ts', args))
  await Promise.all(workers.map((worker) => worker.receive<{ ready: true }>()))
  phase.tick()
  const cells: ExactnessCell[] = []
  try {
    for (const contender of SHARED) {
      phase.note(contender.id)
      await admin.flushall()
      for (const worker of workers) worker.send(contender.id)
      const answers = await Promise.all(workers.map((worker) => worker.receive<{ admitted: number; failed: number }>()))
      cells.push({
        contender: contender.id,
        attempts: processes * perProcess,
        limit,
        admitted: answers.reduce((sum, a) => sum + a.admitted, 0),
        failed: answers.reduce((sum, a) => sum + a.failed, 0),
      })
      phase.tick()
    }
  } finally {
    await Promise.all(workers.map((worker) => worker.close()))
    await admin.flushall()
  }
  phase.done()
  return cells
}
