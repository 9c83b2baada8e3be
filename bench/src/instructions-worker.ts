// One in-process contender's decisions, run under cachegrind by instructions.ts: sets it up for
// a rule shape, then makes <count> decisions, <in flight> at a time, as the decisions measure
// drives them, and exits. Arguments: contender id (or `floor`), rule shape, decisions, in flight.
// `floor` is a decider whose decision is a constant, awaited as every decider's is: what the
// loop, the promises and the awaits cost around any library's call.
import { LIMIT_NEVER_REACHED, PERIOD_MS } from './config.js'
import type { Decider, RuleShape } from './contenders/contender.js'
import { contenderById } from './contenders/index.js'
import { driveCount } from './drive.js'
import { identifiersOf } from './workload.js'

const [id, shape, count, inFlight] = process.argv.slice(2) as [string, RuleShape, string, string]

const ANSWER = { allowed: true }
const floor: Decider = {
  async decide() {
    const decision = await Promise.resolve(ANSWER)
    return decision.allowed
  },
  teardown: async () => {},
}

const decider =
  id === 'floor'
    ? floor
    : await contenderById(id).setup({ client: undefined, shape, limit: LIMIT_NEVER_REACHED, periodMs: PERIOD_MS })
const run = await driveCount(decider, identifiersOf(shape, 'many'), Number(inFlight), Number(count))
await decider.teardown()
if (run.errors > 0 || run.admitted !== run.decisions) {
  throw new Error(
    `${id}: ${run.errors} errors, ${run.admitted} of ${run.decisions} admitted (${String(run.firstError)})`,
  )
}
