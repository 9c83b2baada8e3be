// Run under `node --cpu-prof` by profile.ts: one contender, 256 in flight over 10,000
// identifiers, for a few seconds after a warm-up.
import { Redis } from 'ioredis'
import { LIMIT_NEVER_REACHED, PERIOD_MS } from './config.js'
import type { RuleShape } from './contenders/contender.js'
import { contenderById } from './contenders/index.js'
import { driveFor } from './drive.js'
import { identifiersOf } from './workload.js'

const [url, id, shape, seconds] = process.argv.slice(2) as [string, string, RuleShape, string]
const contender = contenderById(id)
if (!contender.shapes.includes(shape)) throw new Error(`${id} cannot express the ${shape} rule`)
const client = new Redis(url)
const decider = await contender.setup({
  client: contender.store === 'redis' || contender.syncsWithRedis ? client : undefined,
  shape,
  limit: LIMIT_NEVER_REACHED,
  periodMs: PERIOD_MS,
})
const ids = identifiersOf(shape, 'many')
await driveFor(decider, ids, 256, 1_000)
// The profile's sample times are on this clock, in µs: they let the summary leave out start-up and warm-up.
const fromUs = Number(process.hrtime.bigint() / 1000n)
const run = await driveFor(decider, ids, 256, Number(seconds) * 1000)
const toUs = Number(process.hrtime.bigint() / 1000n)
const perSecond = run.decisions / run.seconds
const cpuUsPerDecision = (run.cpuSeconds / run.decisions) * 1e6
process.stdout.write(`${JSON.stringify({ perSecond, cpuUsPerDecision, errors: run.errors, fromUs, toUs })}\n`)
await decider.teardown()
client.disconnect()
