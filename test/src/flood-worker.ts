// One of several processes flooding one Redis. Started with a Redis URL; reads one FloodRound
// per line (JSON) from stdin, fires its consumes all at once on a limiter with every option at
// its default but the clock, and prints a FloodResult line.
import { createInterface } from 'node:readline'
import { createLimiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import type { FloodResult, FloodRound } from './flood-round.js'

const [url] = process.argv.slice(2) as [string]
const client = new Redis(url)
/** One fixed time for every process: an hour's window cannot end while they race. */
const NOW = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000) + 1_000

for await (const line of createInterface({ input: process.stdin })) {
  const { algorithm, prefix, limit, decisions, identifiers, refusalCache } = JSON.parse(line) as FloodRound
  const limiter = createLimiter({
    store: new RedisStore({ client, prefix, clock: () => NOW, ...(refusalCache ? {} : { refusalCache: false }) }),
    rules: { hot: { algorithm, windows: [{ limit, period: '1h' }] } },
    onWarning: (message, code) => process.stderr.write(`${code}: ${message}\n`),
  })
  const made = await Promise.all(
    Array.from({ length: decisions }, (_, i) =>
      limiter.consume('hot', identifiers === 'one' ? 'ip:203.0.113.7' : `ip:10.0.${i >> 8}.${i & 255}`),
    ),
  )
  const result: FloodResult = {}
  for (const decision of made) result[decision.reason] = (result[decision.reason] ?? 0) + 1
  // What a failing round says went wrong, for the test's message.
  const failed = made.find((decision) => decision.error !== undefined)
  if (failed) process.stderr.write(`flood worker: ${failed.reason}: ${failed.error?.message}\n`)
  process.stdout.write(`${JSON.stringify(result)}\n`)
}
client.disconnect()
