// One limiter of the metrics-cost measure, with one variant's metrics, in a process of its own.
// Arguments: variant, rules, decisions in flight, decisions per turn. Answers each line
// `<warm-up pairs> <pairs>` with the wall ns per decision of each turn with the metrics'
// observer detached and attached, in pairs whose order alternates, and the observer's own ns per
// decision it is shown (isolatedCost).
import { createInterface } from 'node:readline'
import type { Decision, DecisionObserver, Rule } from '@tollgate/core'
import { driveCount } from './drive.js'
import { ISOLATED } from './measures/metrics-cost.js'
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
  const isolatedNs = await isolatedCost()
  process.stdout.write(`${JSON.stringify({ without, withMetrics, isolatedNs, errors, firstError })}\n`)
}
await decider.teardown()

/**
 * The observer's own work per decision, as the limiter hands it each one: real decisions, made
 * with the observer detached, shown to it in a loop, one in `timeEvery` with the two clock reads
 * a timed decision costs; less the same loop handing them to a function that does nothing.
 * The lowest of several rounds: what the work costs when nothing else runs.
 */
async function isolatedCost(): Promise<number> {
  decider.detach()
  const rules = decider.rules
  const samples: Array<{ rule: Rule; decision: Decision }> = []
  for (let i = 0; i < ISOLATED.decisions; i++) {
    const rule = rules[i % rules.length] as Rule
    samples.push({ rule, decision: await decider.limiter.consume(rule.name, ids(i)) })
  }
  decider.attach()
  const { observer } = decider
  const nothing: DecisionObserver = { timeEvery: 0, decided() {}, storeFailed() {} }
  const timeEvery = observer.timeEvery
  const round = (target: DecisionObserver) => {
    const start = process.hrtime.bigint()
    let untilTimed = timeEvery
    for (let pass = 0; pass < ISOLATED.passes; pass++) {
      for (const { rule, decision } of samples) {
        let seconds = Number.NaN
        if (timeEvery > 0 && --untilTimed === 0) {
          untilTimed = timeEvery
          const began = performance.now()
          seconds = (performance.now() - began) / 1000
        }
        target.decided(rule, decision, seconds)
      }
    }
    return Number(process.hrtime.bigint() - start) / (ISOLATED.passes * samples.length)
  }
  let best = Number.POSITIVE_INFINITY
  let bestEmpty = Number.POSITIVE_INFINITY
  for (let r = 0; r < ISOLATED.rounds; r++) {
    best = Math.min(best, round(observer))
    bestEmpty = Math.min(bestEmpty, round(nothing))
  }
  return best - bestEmpty
}
