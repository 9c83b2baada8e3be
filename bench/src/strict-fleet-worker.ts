// One of the strict-fleet bench's processes: reads a run, one JSON line at a time, from stdin;
// decides as fast as its callers can for the run's time and prints what it decided.
import { createInterface } from 'node:readline'
import { setImmediate as turn } from 'node:timers/promises'
import { createLimiter, HybridStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import type { Decider } from './contenders/contender.js'
import { contenderById } from './contenders/index.js'
import { deciderOf } from './contenders/tollgate.js'

export interface FleetRun {
  id: string
  limit: number
  periodMs: number
  ms: number
  identifiers: number
  callers: number
}

export interface FleetOutcome {
  decisions: number
  admitted: number
  waited: number
  failed: number
}

export const STRICT_ID = 'tollgate/hybrid-strict/fixed-window'
/** Decisions a caller makes between turns of the event loop, so that the sync's timer runs beside them. */
const TURN_EVERY = 256

const [url] = process.argv.slice(2) as [string]
const client = new Redis(url)
await client.ping()
process.stdout.write(`${JSON.stringify({ ready: true })}\n`)

async function strictDecider(run: FleetRun): Promise<Decider & { waited(): number }> {
  const store = new HybridStore({ client, prefix: 'fleet:', consistency: 'strict' })
  const limiter = createLimiter({
    store,
    rules: { r: { algorithm: 'fixed-window', windows: [{ limit: run.limit, period: run.periodMs }] } },
    onWarning: () => {},
  })
  return { ...deciderOf(limiter), waited: () => store.stats().leaseRoundTrips }
}

for await (const line of createInterface({ input: process.stdin })) {
  const run = JSON.parse(line) as FleetRun
  const decider =
    run.id === STRICT_ID
      ? await strictDecider(run)
      : await contenderById(run.id).setup({ client, shape: 'one-window', limit: run.limit, periodMs: run.periodMs })
  const outcome: FleetOutcome = { decisions: 0, admitted: 0, waited: 0, failed: 0 }
  const until = performance.now() + run.ms
  await Promise.all(
    Array.from({ length: run.callers }, async (_, caller) => {
      let n = caller
      while (performance.now() < until) {
        if (++n % TURN_EVERY === 0) await turn()
        try {
          if (await decider.decide([`ip:${n % run.identifiers}`])) outcome.admitted++
        } catch {
          outcome.failed++
        }
        outcome.decisions++
      }
    }),
  )
  outcome.waited = 'waited' in decider ? (decider as { waited(): number }).waited() : outcome.decisions
  await decider.teardown()
  process.stdout.write(`${JSON.stringify(outcome)}\n`)
}
client.disconnect()
