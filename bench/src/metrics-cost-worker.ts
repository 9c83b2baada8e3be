// One limiter of the metrics-cost measure, in a process of its own so that the one without
// metrics runs code that has never seen an observer. Arguments: variant, rules, decisions in
// flight. Answers each line `<decisions>` with the wall ns per decision of that many decisions.
import { createInterface } from 'node:readline'
import { driveCount } from './drive.js'
import { type MetricsVariant, metricsDecider } from './metrics-decider.js'
import { identifiersOf } from './workload.js'

const [variant, rules, inFlight] = process.argv.slice(2) as [MetricsVariant, string, string]
const decider = metricsDecider(variant, Number(rules))
const ids = identifiersOf('one-window', 'many')
process.stdout.write(`${JSON.stringify({ ready: true })}\n`)

for await (const line of createInterface({ input: process.stdin })) {
  const run = await driveCount(decider, ids, Number(inFlight), Number(line))
  const firstError = run.firstError === undefined ? undefined : String(run.firstError)
  const ns = (run.seconds * 1e9) / Math.max(1, run.decisions)
  process.stdout.write(`${JSON.stringify({ ns, errors: run.errors, firstError })}\n`)
}
await decider.teardown()
