import { Redis } from 'ioredis'
import { type BenchConfig, LIMIT_NEVER_REACHED, PERIOD_MS } from '../config.js'
import type { RuleShape } from '../contenders/contender.js'
import { CONTENDERS } from '../contenders/index.js'
import { driveCount } from '../drive.js'
import { commandStats, instrument } from '../redis-info.js'
import { identifiersOf } from '../workload.js'
import type { MeasureContext } from './context.js'

export interface CommandCell {
  contender: string
  shape: RuleShape
  decisions: number
  /** Per decision: commands the client handed to ioredis. */
  clientCommands: number
  /** Per decision: writes on the socket with one decision in flight, i.e. round trips. */
  roundTrips: number
  bytesOut: number
  bytesIn: number
  /** Per decision: every command Redis ran, those run inside scripts included. */
  serverCommands: number
  /** Per decision, by command name, as Redis's INFO commandstats counts them. */
  byCommand: Record<string, number>
  /** Per decision: µs Redis spent executing the client's commands (for a script, all of it), from commandstats. */
  redisUs: number
}

/** What each sends is counted on the run's ioredis client: a contender with a client of its own is left out. */
const REDIS_CONTENDERS = CONTENDERS.filter((contender) => contender.store === 'redis' && !contender.ownClient)

function cases(): Array<{ id: string; shape: RuleShape }> {
  return REDIS_CONTENDERS.flatMap((contender) => contender.shapes.map((shape) => ({ id: contender.id, shape })))
}

export function commandUnits(_config: BenchConfig): number {
  return cases().length
}

/** The bench's own calls on the admin connection, left out of the counts. */
const OWN_COMMANDS = /^(info|config|flushall)/
/** What contenders send themselves; the rest runs inside their scripts, and its time is already in the script's. */
const TOP_LEVEL = /^(evalsha|eval|multi|exec)$/

/**
 * Measure 2: with one decision in flight over 10,000 identifiers, what each Redis contender
 * sends (counted on its ioredis client) and what Redis runs (INFO commandstats delta).
 */
export async function measureCommands(context: MeasureContext): Promise<CommandCell[]> {
  const { config, redisUrl, admin, progress } = context
  const phase = progress.phase('Redis commands', commandUnits(config))
  // A client of its own, with the same default options, so the counting wrappers touch no other measure.
  const client = new Redis(redisUrl)
  await client.ping()
  const traffic = instrument(client)
  const cells: CommandCell[] = []
  for (const { id, shape } of cases()) {
    const contender = REDIS_CONTENDERS.find((c) => c.id === id)!
    phase.note(`${id} (${shape})`)
    await admin.flushall()
    const decider = await contender.setup({ client, shape, limit: LIMIT_NEVER_REACHED, periodMs: PERIOD_MS })
    const ids = identifiersOf(shape, 'many')
    // Warm-up loads scripts (ioredis sends EVAL once after a NOSCRIPT), so counts are the steady state.
    await driveCount(decider, (i) => ids(i + 5_000), 1, config.commands.warmupDecisions)
    await admin.config('RESETSTAT')
    traffic.reset()
    const run = await driveCount(decider, ids, 1, config.commands.decisions)
    const stats = await commandStats(admin)
    await decider.teardown()
    const n = run.decisions
    const byCommand: Record<string, number> = {}
    let serverCommands = 0
    let topLevelUsec = 0
    for (const [name, { calls, usec }] of stats) {
      if (OWN_COMMANDS.test(name)) continue
      byCommand[name] = calls / n
      serverCommands += calls
      if (TOP_LEVEL.test(name)) topLevelUsec += usec
    }
    cells.push({
      contender: id,
      shape,
      decisions: n,
      clientCommands: traffic.commands / n,
      roundTrips: traffic.writes / n,
      bytesOut: traffic.bytesWritten / n,
      bytesIn: traffic.bytesRead / n,
      serverCommands: serverCommands / n,
      byCommand,
      redisUs: topLevelUsec / n,
    })
    phase.tick()
  }
  client.disconnect()
  phase.done()
  return cells
}
