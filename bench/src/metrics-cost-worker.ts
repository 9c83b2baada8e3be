// One limiter of the metrics-cost measure, with one variant's metrics, in a process of its own
// started with --expose-gc. Arguments: variant, rules, decisions in flight, decisions per turn.
// Answers each line `<warm-up rounds> <rounds>` with, over rounds of three turns (no observer,
// one that does nothing, the metrics' observer; the order rotating), the medians of each turn's
// wall ns per decision and of the differences within a round, and the observer's own ns per
// decision it is shown (isolatedCost).
import { createInterface } from 'node:readline'
import type { Decision, DecisionObserver, Rule } from '@tollgate/core'
import { driveCount } from './drive.js'
import { ISOLATED, type ProcessCost } from './measures/metrics-cost.js'
import {
  EMPTY_OBSERVER,
  type MetricsVariant,
  metricsDecider,
  OBSERVED_STATES,
  type ObservedState,
} from './metrics-decider.js'
import { median } from './stats.js'
import { identifiersOf } from './workload.js'

const { gc } = globalThis as { gc?: (options: { type: 'minor' }) => void }
if (gc === undefined) throw new Error('metrics-cost-worker.ts needs node --expose-gc')
const collect = gc

const [variant, rules, inFlight, perTurn] = process.argv.slice(2) as [MetricsVariant, string, string, string]
const decider = metricsDecider(variant, Number(rules))
const ids = identifiersOf('one-window', 'many')
let errors = 0
let firstError: string | undefined

/** Wall ns per decision of one turn. It starts with a minor collection: no turn pays for the garbage of the one before. */
async function turn(state: ObservedState): Promise<number> {
  decider.use(state)
  collect({ type: 'minor' })
  const run = await driveCount(decider, ids, Number(inFlight), Number(perTurn))
  errors += run.errors
  if (run.firstError !== undefined) firstError ??= String(run.firstError)
  return (run.seconds * 1e9) / Math.max(1, run.decisions)
}

/** One turn per state, the first rotating with `round`, so that none always follows another. */
async function roundOf(round: number): Promise<Record<ObservedState, number>> {
  const ns = { detached: 0, empty: 0, metrics: 0 }
  for (let i = 0; i < OBSERVED_STATES.length; i++) {
    const state = OBSERVED_STATES[(round + i) % OBSERVED_STATES.length] as ObservedState
    ns[state] = await turn(state)
  }
  return ns
}

process.stdout.write(`${JSON.stringify({ ready: true })}\n`)
for await (const line of createInterface({ input: process.stdin })) {
  const [warmup, rounds] = line.split(' ').map(Number) as [number, number]
  for (let i = 0; i < warmup; i++) await roundOf(i)
  const measured: Array<Record<ObservedState, number>> = []
  for (let i = 0; i < rounds; i++) measured.push(await roundOf(i))
  const of = (pick: (ns: Record<ObservedState, number>) => number) => median(measured.map(pick))
  const cost: ProcessCost = {
    detachedNs: of((ns) => ns.detached),
    emptyNs: of((ns) => ns.empty),
    metricsNs: of((ns) => ns.metrics),
    callNs: of((ns) => ns.empty - ns.detached),
    attachNs: of((ns) => ns.metrics - ns.detached),
    ownNs: of((ns) => ns.metrics - ns.empty),
    isolatedNs: await isolatedCost(),
  }
  process.stdout.write(`${JSON.stringify({ ...cost, errors, firstError })}\n`)
}
await decider.teardown()

/**
 * The observer's own work per decision, as the limiter hands it each one: real decisions, made
 * with no observer, shown to it in a loop, one in `timeEvery` with the two clock reads a timed
 * decision costs; less the same loop handing them to an observer that does nothing.
 * The lowest of several rounds: what the work costs when nothing else runs.
 */
async function isolatedCost(): Promise<number> {
  decider.use('detached')
  const rules = decider.rules
  const samples: Array<{ rule: Rule; decision: Decision }> = []
  for (let i = 0; i < ISOLATED.decisions; i++) {
    const rule = rules[i % rules.length] as Rule
    samples.push({ rule, decision: await decider.limiter.consume(rule.name, ids(i)) })
  }
  const { observer } = decider
  const timeEvery = observer.timeEvery
  const round = (target: DecisionObserver) => {
    const start = process.hrtime.bigint()
    let untilTimed = timeEvery
    for (let pass = 0; pass < ISOLATED.passes; pass++) {
      for (const { rule, decision } of samples) {
        if (timeEvery > 0 && --untilTimed === 0) {
          untilTimed = timeEvery
          const began = performance.now()
          target.timed?.((performance.now() - began) / 1000)
        }
        target.decided(rule, decision)
      }
    }
    return Number(process.hrtime.bigint() - start) / (ISOLATED.passes * samples.length)
  }
  let best = Number.POSITIVE_INFINITY
  let bestEmpty = Number.POSITIVE_INFINITY
  for (let r = 0; r < ISOLATED.rounds; r++) {
    best = Math.min(best, round(observer))
    bestEmpty = Math.min(bestEmpty, round(EMPTY_OBSERVER))
  }
  return best - bestEmpty
}
