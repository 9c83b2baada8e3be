import { fileURLToPath } from 'node:url'
import { ALGORITHMS } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import type { ExactnessResult, ExactnessRound } from '../src/exactness-round.js'
import { keysWithTtl } from '../src/redis-keys.js'
import { WorkerPool } from '../src/worker-pool.js'

const worker = fileURLToPath(new URL('../src/exactness-worker.ts', import.meta.url))

describe('exactness across processes (4 × 500 concurrent consumes, limit 1000)', () => {
  let pool: WorkerPool
  let client: Redis
  beforeAll(() => {
    pool = new WorkerPool(worker, [inject('redisUrl')], 4)
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await pool.close()
    await client.quit()
  })

  const race = (round: Omit<ExactnessRound, 'limit' | 'decisions' | 'identifiers'>) =>
    pool.broadcast<ExactnessResult>(
      JSON.stringify({ ...round, limit: 1000, decisions: 500, identifiers: [['ip:203.0.113.7']] }),
    )

  // A fixed clock keeps the buckets from refilling mid-test; the race itself is on the server.
  it.each(ALGORITHMS)('%s admits exactly 1000', async (algorithm) => {
    const prefix = `exact:${process.pid}:${algorithm}:`
    const results = await race({ algorithm, prefix, now: 1_700_000_000_000 })
    expect(results.reduce((sum, r) => sum + r.failed, 0)).toBe(0)
    expect(results.reduce((sum, r) => sum + r.admitted, 0)).toBe(1000)
    const keys = await keysWithTtl(client, prefix)
    expect(keys).toHaveLength(1)
    expect(keys[0]?.ttlMs).toBeGreaterThan(0)
  })

  it('sliding-log on the server clock admits exactly 1000', async () => {
    const prefix = `exact:${process.pid}:server-time:`
    const results = await race({ algorithm: 'sliding-log', prefix, now: 'server' })
    expect(results.reduce((sum, r) => sum + r.failed, 0)).toBe(0)
    expect(results.reduce((sum, r) => sum + r.admitted, 0)).toBe(1000)
  })
})
