import { createLimiter, RedisStore } from '@tollgate/core'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'
import { printGrowth } from './growth-table.js'

/*
 * A flood far past `backlog.max` with `whenFull: 'wait'`: every decision beyond the 256 waiting
 * for Redis queues in the process, and each that ends lets the oldest queued one ask. Starts
 * 10,000 to 200,000 `consume` calls at once against a redis-server of its own and times until
 * every one is decided. Draining the queue must cost each decision the same however long it is:
 * the last column is each flood's time per decision over the smallest's. Run with
 * `pnpm --filter @tollgate/bench backlog-flood`.
 */

const FLOODS = [10_000, 100_000, 200_000]
const BACKLOG_MAX = 256

const server = await spawnRedisServer()
const client = new Redis(server.url)

/** Microseconds per decision, from the first call to the last decision. */
async function timeFlood(calls: number): Promise<number> {
  const limiter = createLimiter({
    store: new RedisStore({ client, prefix: `flood:${calls}:` }),
    rules: { flood: { algorithm: 'fixed-window', windows: [{ limit: 1_000_000_000, period: '1 minute' }] } },
    backlog: { max: BACKLOG_MAX, whenFull: 'wait' },
    // Queued decisions wait for room, not for Redis: none may be answered by the failure policy.
    storeTimeoutMs: 60_000,
  })
  const started = performance.now()
  const decisions: Array<Promise<{ allowed: boolean; reason: string }>> = new Array(calls)
  for (let i = 0; i < calls; i++) decisions[i] = limiter.consume('flood', `ip:10.0.${i % 250}.${i % 200}`)
  const decided = await Promise.all(decisions)
  const micros = ((performance.now() - started) * 1_000) / calls
  await limiter.close()
  const other = decided.find((decision) => decision.reason !== 'ok')
  if (other !== undefined) throw new Error(`a decision of the flood was ${other.reason}, not decided by Redis`)
  return micros
}

try {
  await printGrowth(
    `RedisStore, backlog.max ${BACKLOG_MAX} with whenFull 'wait', fixed window, calls started in one turn`,
    { size: 'calls at once', time: 'µs per decision' },
    FLOODS,
    timeFlood,
  )
} finally {
  client.disconnect()
  await server.stop()
}
