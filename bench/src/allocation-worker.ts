// One in-process contender of the allocation measure, in a process of its own started with
// --expose-gc and a young generation large enough that no collection runs during a round.
// Arguments: contender id, Redis URL (for the contenders that sync with Redis), decisions per
// round, rounds, warm-up decisions. Prints the bytes of heap each round's decisions allocated,
// per decision, for the contender and for an awaited call that does nothing.
import { Redis } from 'ioredis'
import { LIMIT_NEVER_REACHED, PERIOD_MS } from './config.js'
import type { Decider } from './contenders/contender.js'
import { contenderById } from './contenders/index.js'
import { identifiersOf } from './workload.js'

const [id, redisUrl, perRound, rounds, warmup] = process.argv.slice(2) as [string, string, string, string, string]
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('allocation-worker needs --expose-gc')
const contender = contenderById(id)
const client = contender.syncsWithRedis ? new Redis(redisUrl) : undefined
const decider = await contender.setup({
  client,
  shape: 'one-window',
  limit: LIMIT_NEVER_REACHED,
  periodMs: PERIOD_MS,
})
const NOTHING: Decider = { decide: () => Promise.resolve(true), teardown: () => Promise.resolve() }
const ids = identifiersOf('one-window', 'many')
let next = 0

async function decide(target: Decider, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await target.decide(ids(next++))
}

/** Bytes allocated per decision in each round: the heap's growth, collected before, not during. */
async function bytesPerDecision(target: Decider): Promise<number[]> {
  const perRoundDecisions = Number(perRound)
  const bytes: number[] = []
  for (let round = 0; round < Number(rounds); round++) {
    ;(gc as () => void)()
    const before = process.memoryUsage().heapUsed
    await decide(target, perRoundDecisions)
    bytes.push((process.memoryUsage().heapUsed - before) / perRoundDecisions)
  }
  return bytes
}

// Every identifier holds its state before the rounds: they measure decisions, not new keys.
await decide(decider, Number(warmup))
await decide(NOTHING, Number(warmup))
const result = { bytes: await bytesPerDecision(decider), nothingBytes: await bytesPerDecision(NOTHING) }
await decider.teardown()
client?.disconnect()
process.stdout.write(`${JSON.stringify(result)}\n`)
process.exit(0)
