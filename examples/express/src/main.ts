import { createLimiter, RedisStore, shareFleetStats } from '@tollgate/core'
import { prometheusMetrics } from '@tollgate/prometheus'
import { Redis } from 'ioredis'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { createApp } from './app.js'
import { rules } from './rules.js'

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
// Without a store the limiter counts in memory, for this process only.
const limiter = createLimiter({ rules, ...(redis ? { store: new RedisStore({ client: redis }) } : {}) })
const registry = new Registry()
collectDefaultMetrics({ register: registry })
prometheusMetrics(limiter, { registry })
// With Redis, this process's counts join the fleet's, which `tollgate top` and `tollgate watch` read.
const fleetStats = redis ? shareFleetStats(limiter, { client: redis }) : undefined
const port = Number(process.env.PORT ?? 3000)
const base = `127.0.0.1:${port}`

const server = createApp({ limiter, registry }).listen(port, '127.0.0.1', () => {
  const store = redis ? `the Redis store (${process.env.REDIS_URL})` : 'the in-memory store'
  console.log(`Tollgate Express example on http://${base} with ${store}. Ctrl-C stops it.

Six logins within 3 s: five pass, the sixth is refused by the 5 per 3 s window:
  for i in 1 2 3 4 5 6; do curl -si -X POST ${base}/login -H 'content-type: application/json' -d '{"username":"alice","password":"x"}' | grep -iE '^(HTTP|ratelimit|retry-after)'; done

A read for user 1, counted under api.read and its parent api:
  curl -si ${base}/api/items -H 'x-user-id: 1' | grep -iE '^(HTTP|ratelimit)'

Two uploads of 600 KB: the second would go over 1,000,000 bytes per minute:
  for i in 1 2; do head -c 600000 /dev/zero | curl -si -X POST ${base}/upload -H 'content-type: application/octet-stream' --data-binary @- | grep -iE '^(HTTP|ratelimit|retry-after)'; done

Four wrong codes: three are answered, the fourth is refused and locks dave out for 15 minutes:
  for i in 1 2 3 4; do curl -si -X POST ${base}/otp/verify -H 'content-type: application/json' -d '{"username":"dave","code":"123456"}' | grep -iE '^(HTTP|retry-after)'; done

A test organisation: 2 a minute for all its users together, the third refused by reports.org:
  for user in 1 2 3; do curl -si ${base}/orgs/ci-test/reports -H "x-user-id: $user" | grep -iE '^(HTTP|ratelimit-policy)'; done

What the limiter counted, as Prometheus scrapes it:
  curl -s ${base}/metrics | grep -E '^tollgate_(decisions|window_denials)_total'
`)
})

async function shutdown() {
  await new Promise((resolve) => server.close(resolve))
  await fleetStats?.close()
  await limiter.close()
  await redis?.quit()
}

process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)
