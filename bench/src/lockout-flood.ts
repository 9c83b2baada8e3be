import { createLimiter, MemoryStore } from '@tollgate/core'
import { printGrowth } from './growth-table.js'

/*
 * An identifier flood against a rule that blocks (a login's lockout, say), past the MemoryStore's
 * `maxKeys`: every identifier is admitted once, refused once, and blocked, so the store's table of
 * blocks stays full and each new block takes the place of the oldest. Times the identifiers after
 * the table is full, for tables of 10,000 to 1,000,000 blocks. The cost of a block must not grow
 * with the table: the last column is each size's time over the smallest's. Run with
 * `pnpm --filter @tollgate/bench lockout-flood`.
 */

const SIZES = [10_000, 100_000, 1_000_000]
/** Identifiers timed once the table is full. */
const TIMED = 200_000

/** Microseconds per identifier (its two decisions), once `maxKeys` blocks are held. */
async function timeFlood(maxKeys: number): Promise<number> {
  const limiter = createLimiter({
    store: new MemoryStore({ maxKeys, sweepIntervalMs: 0 }),
    rules: {
      login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1h' }], block: { after: 1, for: '1h' } },
    },
  })
  let next = 0
  const flood = async () => {
    const identifier = `user:${next++}`
    await limiter.consume('login', identifier)
    const refused = await limiter.consume('login', identifier)
    if (refused.reason !== 'blocked')
      throw new Error(`the second decision of ${identifier} was ${refused.reason}, not blocked`)
  }
  for (let i = 0; i < maxKeys; i++) await flood()
  const started = process.hrtime.bigint()
  for (let i = 0; i < TIMED; i++) await flood()
  const micros = Number(process.hrtime.bigint() - started) / 1_000 / TIMED
  await limiter.close()
  return micros
}

await printGrowth(
  `MemoryStore, a fixed window of 1 per hour blocking after 1 refusal for an hour; ${TIMED.toLocaleString('en-US')} identifiers timed per size, each admitted once and then blocked`,
  { size: 'blocks held (maxKeys)', time: 'µs per identifier' },
  SIZES,
  timeFlood,
)
