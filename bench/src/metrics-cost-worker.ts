// One limiter of the metrics-cost measure, with one variant's metrics, in a process of its own.
// Arguments: variant, rules, decisions in flight, decisions per turn. Answers each line
// `<warm-up pairs> <pairs>` with the wall ns per decision of each turn with the metrics'
// observer detached and attached, in pairs whose order alternates.
import { createInterface } from 'node:readline'
import { driveCount } from './drive.js'
import { type MetricsVariant, metricsDecider } from './metrics-decider.js'
import { identifiersOf } from './workload.js'

const [variant, rules, inFlight, perTurn] = process.argv.slice(2) as [MetricsVariant, string, string, string]
const decider = metricsDecider(variant, Number(rules))
const ids = identifiersOf('one-window', 'many')
let errors = 0
let firstError: string | undefined

async function turn(attached: boolean): Promise<number> {
  if (attached) decider.attach()
  else decider.detach()
  const run = await driveCount(decider, ids, Number(inFlight), Number(perTurn))
  errors += run.errors
  if (run.firstError !== undefined) firstError ??= String(run.firstError)
  return (run.seconds * 1e9) / Math.max(1, run.decisions)
}

process.stdout.write(`${JSON.stringify({ ready: true })}\n`)
for await (const line of createInterface({ input: process.stdin })) {
  const [warmup, pairs] = line.split(' ').map(Number) as [number, number]
  for (let i = 0; i < warmup; i++) {
    await turn(true)
    await turn(false)
  }
  const without: number[] = []
  const withMetrics: number[] = []
  for (let i = 0; i < pairs; i++) {
    // Which goes first alternates, so that neither always follows the other's garbage.
    const first = i % 2 === 0
    const a = await turn(first)
    const b = await turn(!first)
    withMetrics.push(first ? a : b)
    without.push(first ? b : a)
  }
  process.stdout.write(`${JSON.stringify({ without, withMetrics, errors, firstError })}\n`)
}
await decider.teardown()
