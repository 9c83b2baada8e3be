import { createLimiter, MemoryStore } from '@tollgate/core'
import { printGrowth } from './growth-table.js'

/*
 * A sliding log held at its limit, on a MemoryStore: each admitted request adds an entry and
 * one leaves the longest window, so the log stays as long as its limit. Times one decision at
 * that steady state for logs of 1,000 to 100,000 entries, the clock injected so that exactly one
 * entry leaves per decision. A decision's cost must not grow with the log: the last column is
 * each length's time over the shortest's. Run with `pnpm --filter @tollgate/bench held-log`.
 */

const LENGTHS = [1_000, 10_000, 100_000]
const DECISIONS = 50_000
const START = 1_700_000_000_000

/** Microseconds per decision, once a log of `limit` entries is full. */
async function timeHeldLog(limit: number, decisions: number): Promise<number> {
  let now = START
  const store = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
  const limiter = createLimiter({
    store,
    rules: { held: { algorithm: 'sliding-log', windows: [{ limit, period: '1 minute' }] } },
  })
  // One request per 60,000 / limit ms: the minute holds `limit` of them.
  const step = 60_000 / limit
  let elapsed = 0
  const next = () => {
    elapsed += step
    now = START + Math.floor(elapsed)
  }
  for (let i = 0; i < limit; i++) {
    next()
    await limiter.consume('held', 'user:1')
  }
  let admitted = 0
  const started = process.hrtime.bigint()
  for (let i = 0; i < decisions; i++) {
    next()
    if ((await limiter.consume('held', 'user:1')).allowed) admitted++
  }
  const micros = Number(process.hrtime.bigint() - started) / 1_000 / decisions
  await limiter.close()
  // Rounding the clock to whole ms may put one more request in a minute than the limit.
  if (admitted < decisions * 0.99)
    throw new Error(`the log refused ${decisions - admitted} of ${decisions}: not held at its limit`)
  return micros
}

await printGrowth(
  `MemoryStore, sliding log, one window per minute, one identifier; ${DECISIONS.toLocaleString('en-US')} decisions per length`,
  { size: 'log length (limit per minute)', time: 'µs per decision' },
  LENGTHS,
  (limit) => timeHeldLog(limit, DECISIONS),
)
