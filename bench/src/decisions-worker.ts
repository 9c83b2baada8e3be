// One contender of the decisions measure (section 1), for one rule shape, in a process of its own,
// as a server holds its one limiter: the code of one library, and of one Tollgate store and
// algorithm, compiled for that use alone, not shared with the other contenders' calls.
// Arguments: contender id, Redis URL, rule shape. Reads commands, one a line, and answers each
// with a line of JSON:
//   setup <spread> <limit>   makes the contender's decider for the scenario's keys and limit
//   drive <ms> <in flight>   decides for <ms>, that many at a time: a DriveResult
//   settle                   ends the work it does beside its decisions (a HybridStore's sync)
//   teardown                 closes the decider
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { PERIOD_MS } from './config.js'
import type { Decider, RuleShape } from './contenders/contender.js'
import { contenderById } from './contenders/index.js'
import { driveFor } from './drive.js'
import { identifiersOf, type KeySpread } from './workload.js'

const [id, redisUrl, shape] = process.argv.slice(2) as [string, string, RuleShape]
const contender = contenderById(id)
const client = contender.store === 'redis' || contender.syncsWithRedis ? new Redis(redisUrl) : undefined
let decider: Decider | undefined
let ids: (i: number) => readonly string[] = () => []

function current(): Decider {
  if (decider === undefined) throw new Error(`${id}: no decider set up`)
  return decider
}

const answer = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`)

for await (const line of createInterface({ input: process.stdin })) {
  const [command, first, second] = line.split(' ')
  if (command === 'setup') {
    decider = await contender.setup({ client, shape, limit: Number(second), periodMs: PERIOD_MS })
    ids = identifiersOf(shape, first as KeySpread)
    answer({})
  } else if (command === 'drive') {
    const run = await driveFor(current(), ids, Number(second), Number(first))
    answer({ ...run, firstError: run.firstError === undefined ? undefined : String(run.firstError) })
  } else if (command === 'settle') {
    await current().settle?.()
    answer({})
  } else if (command === 'teardown') {
    await current().teardown()
    decider = undefined
    answer({})
  } else throw new Error(`decisions-worker: unknown command ${line}`)
}
client?.disconnect()
