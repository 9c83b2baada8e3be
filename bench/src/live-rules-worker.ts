// One process of a fleet following live rules. Prints one JSON line when it is ready, then one
// per epoch it applies, with the time it applied it; exits when stdin closes.
import { createInterface } from 'node:readline'
import { createLimiter, LiveRules } from '@tollgate/core'
import { Redis } from 'ioredis'
import { LIVE_RULES_DEFAULTS } from './measures/live-rules.js'

const [url, prefix, mode, pollIntervalMs] = process.argv.slice(2) as [string, string, 'nudge' | 'poll', string]
const client = new Redis(url)
const live = new LiveRules({
  client,
  defaults: LIVE_RULES_DEFAULTS,
  prefix,
  pollIntervalMs: Number(pollIntervalMs),
  nudges: mode === 'nudge',
  onWarning: (message, code) => process.stderr.write(`${code}: ${message}\n`),
})
const limiter = createLimiter({ rules: live })
limiter.on('rules', (change) => {
  // The wall clock with sub-millisecond resolution: processes of one machine read the same clock.
  const atMs = performance.timeOrigin + performance.now()
  process.stdout.write(`${JSON.stringify({ epoch: change.epoch, atMs })}\n`)
})
await live.refresh()
process.stdout.write(`${JSON.stringify({ ready: true })}\n`)

for await (const _ of createInterface({ input: process.stdin })) {
  // Nothing is asked of it: stdin closing is the end.
}
await limiter.close()
await live.close()
client.disconnect()
