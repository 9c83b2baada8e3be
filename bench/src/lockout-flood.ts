import { createLimiter, MemoryStore } from '@tollgate/core'

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

// Warm-up, so that the first size is not timed while V8 compiles.
await timeFlood(SIZES[0] as number)
console.log(
  `Node ${process.version}; MemoryStore, a fixed window of 1 per hour blocking after 1 refusal for an hour; ${TIMED.toLocaleString('en-US')} identifiers timed per size, each admitted once and then blocked`,
)
console.log('\n| blocks held (maxKeys) | µs per identifier | × the smallest |')
console.log('| ---: | ---: | ---: |')
let smallest = 0
for (const maxKeys of SIZES) {
  const micros = await timeFlood(maxKeys)
  if (smallest === 0) smallest = micros
  console.log(`| ${maxKeys.toLocaleString('en-US')} | ${micros.toFixed(2)} | ×${(micros / smallest).toFixed(2)} |`)
}
