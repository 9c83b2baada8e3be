import { LineChild } from '../child-process.js'
import { type BenchConfig, LIMIT_NEVER_REACHED, LIMIT_OVER } from '../config.js'
import type { Contender, RuleShape } from '../contenders/contender.js'
import { CONTENDERS } from '../contenders/index.js'
import type { DriveResult } from '../drive.js'
import { redisCpuSeconds } from '../redis-info.js'
import { rotate } from '../stats.js'
import type { KeySpread } from '../workload.js'
import type { MeasureContext } from './context.js'
import { addRun, emptyTally, type RunTally } from './run-tally.js'

export interface DecisionScenario {
  shape: RuleShape
  spread: KeySpread
  inFlight: number
}

export interface DecisionCell extends DecisionScenario, RunTally {
  contender: string
}

export function decisionScenarios(config: BenchConfig): DecisionScenario[] {
  const scenarios: DecisionScenario[] = []
  for (const shape of ['one-window', 'two-by-two'] as const)
    for (const spread of ['many', 'hot'] as const)
      for (const inFlight of config.decisions.inFlight) scenarios.push({ shape, spread, inFlight })
  // An attacker hammering one key it is refused on, at the concurrency the targets are set at.
  scenarios.push({ shape: 'one-window', spread: 'hot-over-limit', inFlight: Math.max(...config.decisions.inFlight) })
  return scenarios
}

function contendersFor(shape: RuleShape): Contender[] {
  return CONTENDERS.filter((contender) => contender.shapes.includes(shape))
}

export function decisionUnits(config: BenchConfig): number {
  return decisionScenarios(config).reduce(
    (sum, s) => sum + contendersFor(s.shape).length * (1 + config.decisions.repetitions),
    0,
  )
}

/**
 * Measure 1: decisions per second at each library's own API. Each contender decides in a process
 * of its own per rule shape (decisions-worker.ts), as a server holds its one limiter. Per scenario
 * every contender is set up, warmed up once, then measured `repetitions` times in an order rotated
 * each repetition, with Redis flushed before each measurement.
 */
export async function measureDecisions(context: MeasureContext): Promise<DecisionCell[]> {
  const { config, admin, progress, redisUrl } = context
  const phase = progress.phase('decisions/s', decisionUnits(config))
  const cells: DecisionCell[] = []
  let workers: { shape: RuleShape; processes: Map<string, LineChild> } | undefined
  try {
    for (const scenario of decisionScenarios(config)) {
      const contenders = contendersFor(scenario.shape)
      if (workers?.shape !== scenario.shape) {
        if (workers) await closeAll(workers.processes)
        workers = {
          shape: scenario.shape,
          processes: new Map(
            contenders.map((contender) => [
              contender.id,
              new LineChild('decisions-worker.ts', [contender.id, redisUrl, scenario.shape]),
            ]),
          ),
        }
      }
      const { processes } = workers
      const workerOf = (contender: Contender) => processes.get(contender.id) as LineChild
      const byContender = new Map<string, DecisionCell>()
      const where = `${scenario.shape}, ${scenario.spread}, ${scenario.inFlight} in flight`
      const limit = scenario.spread === 'hot-over-limit' ? LIMIT_OVER : LIMIT_NEVER_REACHED
      await Promise.all(contenders.map((contender) => workerOf(contender).request(`setup ${scenario.spread} ${limit}`)))
      for (const contender of contenders) {
        const cell: DecisionCell = { ...scenario, contender: contender.id, ...emptyTally() }
        byContender.set(contender.id, cell)
        cells.push(cell)
      }
      for (const contender of contenders) {
        phase.note(`warm-up ${contender.id} (${where})`)
        await admin.flushall()
        await workerOf(contender).request(`drive ${config.decisions.warmupMs} ${scenario.inFlight}`)
        await workerOf(contender).request('settle')
        phase.tick()
      }
      for (let rep = 0; rep < config.decisions.repetitions; rep++) {
        for (const contender of rotate(contenders, rep)) {
          phase.note(`${contender.id} (${where}) rep ${rep + 1}`)
          await admin.flushall()
          const redisBefore = await redisCpuSeconds(admin)
          const run = await workerOf(contender).request<DriveResult>(
            `drive ${config.decisions.measureMs} ${scenario.inFlight}`,
          )
          const redisUsed = (await redisCpuSeconds(admin)) - redisBefore
          // Its sync of the measured decisions runs now, between measurements, not in the next one.
          await workerOf(contender).request('settle')
          addRun(byContender.get(contender.id) as DecisionCell, run, redisUsed)
          phase.tick()
        }
      }
      await Promise.all(contenders.map((contender) => workerOf(contender).request('teardown')))
    }
  } finally {
    if (workers) await closeAll(workers.processes)
  }
  phase.done()
  return cells
}

async function closeAll(workers: ReadonlyMap<string, LineChild>): Promise<void> {
  await Promise.all([...workers.values()].map((worker) => worker.close()))
}
