import { createLimiter } from '@tollgate/core'
import { Redis } from 'ioredis'
import { createApp } from './app.js'
import { liveRulesFrom } from './live-rules.js'
import { rules } from './rules.js'
import { storeFrom } from './store.js'

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
const store = storeFrom(redis)
const live = liveRulesFrom(redis)
// Without a store the limiter counts in memory, for this process only.
const limiter = createLimiter({ rules: live ?? rules, ...(store ? { store } : {}) })
limiter.on('rules', ({ epoch, changed }) => console.log(`rules of epoch ${epoch} applied: ${changed.join(', ')}`))
limiter.on('rules-rejected', ({ rule, message }) => console.warn(`rule ${rule} rejected: ${message}`))
const port = Number(process.env.PORT ?? 3003)

const server = createApp({ limiter }).listen(port, '127.0.0.1', () => {
  const where = store ? `${store.constructor.name} (${process.env.REDIS_URL})` : 'the in-memory store'
  console.log(`Tollgate on node:http at http://127.0.0.1:${port} with ${where}. Ctrl-C stops it.

Six requests within 10 s: five pass, the sixth is refused:
  for i in 1 2 3 4 5 6; do curl -si 127.0.0.1:${port}/ | grep -iE '^(HTTP|ratelimit|retry-after)'; done
${live ? `Rules are live: change them for every process with \`pnpm rules publish '{"api":{"algorithm":"fixed-window","windows":[{"limit":50,"period":"10s"}]}}'\`\n` : ''}`)
})

async function shutdown() {
  await new Promise((resolve) => server.close(resolve))
  await limiter.close()
  await live?.close()
  await redis?.quit()
}

process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)
