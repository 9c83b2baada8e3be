import { type BenchConfig, PERIOD_MS } from '../config.js'
import { CONTENDERS } from '../contenders/index.js'
import { driveCount } from '../drive.js'
import { usedMemory } from '../redis-info.js'
import { distinctIdentifiers } from '../workload.js'
import type { MeasureContext } from './context.js'

export interface BytesCell {
  contender: string
  hits: number
  identifiers: number
  /** Keys in Redis per identifier. */
  keysPerIdentifier: number
  /** Mean `MEMORY USAGE key SAMPLES 0` over up to SAMPLE_KEYS keys. */
  memoryUsagePerKey: number
  /** `used_memory` after minus before, per identifier: the key, its value, its TTL and Redis's dictionaries. */
  usedMemoryPerIdentifier: number
  refused: number
  errors: number
}

const LIMIT = 100
const SAMPLE_KEYS = 200
const IN_FLIGHT = 256

/** A contender on a client of its own writes the keys another one here writes: the same bytes. */
const REDIS_CONTENDERS = CONTENDERS.filter(
  (contender) => contender.store === 'redis' && contender.role !== 'ceiling' && !contender.ownClient,
)

export function bytesUnits(config: BenchConfig): number {
  return REDIS_CONTENDERS.length * config.bytes.runs.length
}

/**
 * Measure 4: Redis memory per identifier for a rule of 100 per minute, after 1 and after 50
 * admitted hits on each of a run's identifiers.
 */
export async function measureBytes(context: MeasureContext): Promise<BytesCell[]> {
  const { config, client, admin, progress } = context
  const phase = progress.phase('bytes/identifier', bytesUnits(config))
  const cells: BytesCell[] = []
  for (const contender of REDIS_CONTENDERS) {
    for (const { hits, identifiers: count } of config.bytes.runs) {
      const identifiers = distinctIdentifiers(count)
      phase.note(`${contender.id}, ${hits} hit${hits === 1 ? '' : 's'} × ${count.toLocaleString('en-US')}`)
      const decider = await contender.setup({ client, shape: 'one-window', limit: LIMIT, periodMs: PERIOD_MS })
      // Loads the scripts first, so the script cache is not counted as the identifiers' memory.
      await decider.decide(['warm-up'])
      await admin.flushall()
      const before = await usedMemory(admin)
      const run = await driveCount(decider, (i) => identifiers[i % count] as string[], IN_FLIGHT, count * hits)
      const after = await usedMemory(admin)
      const keys = await admin.dbsize()
      const sample: string[] = []
      for await (const batch of admin.scanStream({ count: 100 })) {
        sample.push(...(batch as string[]))
        if (sample.length >= SAMPLE_KEYS) break
      }
      let usage = 0
      for (const key of sample.slice(0, SAMPLE_KEYS)) usage += Number(await admin.memory('USAGE', key, 'SAMPLES', 0))
      await decider.teardown()
      cells.push({
        contender: contender.id,
        hits,
        identifiers: count,
        keysPerIdentifier: keys / count,
        memoryUsagePerKey: usage / Math.max(1, Math.min(sample.length, SAMPLE_KEYS)),
        usedMemoryPerIdentifier: (after - before) / count,
        refused: run.decisions - run.admitted,
        errors: run.errors,
      })
      phase.tick()
    }
  }
  await admin.flushall()
  phase.done()
  return cells
}
