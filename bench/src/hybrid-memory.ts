import { createLimiter, HybridStore } from '@tollgate/core'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'

/*
 * How much memory (V8 heap and array buffers) a HybridStore holds per tracked key-window: 1,000,000 distinct identifiers whose
 * keys are 24 characters (`tg:api:{user:0000000}:fw`), one admitted request each, on a rule of one
 * window, measured after a forced GC with the units not yet pushed and again after a sync pushed
 * them. Run with `pnpm --filter @tollgate/bench hybrid-memory`; it starts a redis-server of its own.
 * What a sync costs per key is `pnpm bench --only hybrid-sync`'s to measure.
 */

const KEYS = 1_000_000
const gc = globalThis.gc
if (typeof gc !== 'function') {
  console.error('Run with pnpm --filter @tollgate/bench hybrid-memory: the heap is measured after a forced GC')
  process.exit(2)
}
// The keys' columns are typed arrays, whose memory is outside the V8 heap: both are counted.
const heap = (): number => {
  gc()
  gc()
  const { heapUsed, arrayBuffers } = process.memoryUsage()
  return heapUsed + arrayBuffers
}

const server = await spawnRedisServer()
const client = new Redis(server.url)
try {
  // A million keys take Redis seconds to sync: the wait is raised for that one sync.
  const store = new HybridStore({
    client,
    autoSync: false,
    syncTimeoutMs: 120_000,
    outage: { afterMs: Number.POSITIVE_INFINITY },
  })
  const limiter = createLimiter({
    store,
    rules: { api: { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1h' }] } },
  })
  const empty = heap()
  for (let i = 0; i < KEYS; i++) {
    const decision = await limiter.consume('api', `user:${String(i).padStart(7, '0')}`)
    if (!decision.allowed) throw new Error(`identifier ${i} was refused: every identifier is new`)
  }
  const dirty = heap()
  const report = await store.syncNow()
  if (report.error) throw report.error
  const synced = heap()
  const { trackedKeys } = store.stats()
  console.log(`Node ${process.version}; ${trackedKeys.toLocaleString('en')} keys of 24 characters, one window each`)
  console.log('\n| state | heap and array buffers per key-window (bytes) |\n| --- | ---: |')
  console.log(`| units not yet pushed | ${Math.round((dirty - empty) / trackedKeys)} |`)
  console.log(`| synced | ${Math.round((synced - empty) / trackedKeys)} |`)
  await limiter.close()
} finally {
  client.disconnect()
  await server.stop()
}
