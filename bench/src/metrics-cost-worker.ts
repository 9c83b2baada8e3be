// One limiter of the metrics-cost measure in a process of its own, so that no variant's
// compiled code has seen another's: the one without metrics has never had an observer.
// Arguments: variant, rules. Answers each line `<ms>` with the decisions made in that time.
import { createInterface } from 'node:readline'
import { driveFor } from './drive.js'
import { type MetricsVariant, metricsDecider } from './metrics-decider.js'
import { identifiersOf } from './workload.js'

const [variant, rules, inFlight] = process.argv.slice(2) as [MetricsVariant, string, string]
const decider = metricsDecider(variant, Number(rules))
const ids = identifiersOf('one-window', 'many')
process.stdout.write(`${JSON.stringify({ ready: true })}\n`)

for await (const line of createInterface({ input: process.stdin })) {
  const run = await driveFor(decider, ids, Number(inFlight), Number(line))
  const { decisions, errors, seconds, cpuSeconds } = run
  const firstError = run.firstError === undefined ? undefined : String(run.firstError)
  process.stdout.write(`${JSON.stringify({ decisions, errors, seconds, cpuSeconds, firstError })}\n`)
}
await decider.teardown()
