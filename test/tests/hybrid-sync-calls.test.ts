import { createLimiter, HybridStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  CALLS_IN_FLIGHT,
  chunksOf,
  inTurnByNode,
  MAX_CHUNK,
  startInTurn,
} from '../../packages/core/src/stores/hybrid/sync-wire.js'
import { ManualClock } from '../src/manual-clock.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'
import { seededRandom } from '../src/seeded-random.js'

/** A promise and what settles it, for starts the test settles itself. */
function deferred<T>() {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok
    reject = fail
  })
  return { promise, resolve, reject }
}

describe("a sync's calls in turn", () => {
  it('orders calls a node at a time in turn, each node keeping its own order', () => {
    expect(inTurnByNode(['a', 'a', 'a', 'b', 'c', 'c'])).toEqual({ order: [0, 3, 4, 1, 5, 2], nodes: 3 })
    expect(inTurnByNode(['', '', ''])).toEqual({ order: [0, 1, 2], nodes: 1 })
    expect(inTurnByNode([])).toEqual({ order: [], nodes: 0 })
  })

  it("a Cluster's calls: each one master's keys in the sync's order, put in slot order, with each slot's run", () => {
    const random = seededRandom(7)
    const count = 3 * MAX_CHUNK + 123
    const slots = Array.from({ length: count }, () => random(16_384))
    const masterOf = (slot: number) => `m${slot % 3}`
    const chunks = chunksOf(count, (at) => slots[at] as number, masterOf)
    // Every key once.
    expect(chunks.flatMap((chunk) => chunk.indices).sort((a, b) => a - b)).toEqual(slots.map((_, at) => at))
    for (const { indices, slotRuns } of chunks) {
      expect(indices.length).toBeLessThanOrEqual(MAX_CHUNK)
      expect(new Set(indices.map((at) => masterOf(slots[at] as number))).size).toBe(1)
      // Slot by slot, each slot's keys in their order, and the runs as the reference counts them.
      const expected = [...indices].sort((a, b) => (slots[a] as number) - (slots[b] as number) || a - b)
      expect(indices).toEqual(expected)
      const runs: number[] = []
      expected.forEach((at, k) => {
        if (k === 0 || slots[at] !== slots[expected[k - 1] as number]) runs.push(0)
        runs[runs.length - 1] = (runs[runs.length - 1] as number) + 1
      })
      expect(slotRuns).toEqual(runs.length > 1 ? runs : [])
    }
    // Without masters, a call per slot, read together.
    for (const chunk of chunksOf(40, (at) => at % 4)) {
      expect(chunk.slotRuns).toEqual([])
      expect(new Set(chunk.indices.map((at) => at % 4)).size).toBe(1)
    }
  })

  it(`keeps at most ${CALLS_IN_FLIGHT} calls a node in flight, starts the next as one settles, and settles each with its own`, async () => {
    const calls = Array.from({ length: 3 * CALLS_IN_FLIGHT + 2 }, () => deferred<number>())
    const started: number[] = []
    const outcomes = startInTurn(
      calls.map((call, i) => () => {
        started.push(i)
        if (i === 1) throw new Error('call 1 could not be sent')
        return call.promise
      }),
      { order: calls.map((_, i) => i), nodes: 2 },
    )
    // Call 1 threw as it started: it settles at once, and the next call takes its place.
    await expect(outcomes[1]).rejects.toThrow('call 1 could not be sent')
    expect(started).toHaveLength(2 * CALLS_IN_FLIGHT + 1)
    calls[0]?.resolve(10)
    expect(await outcomes[0]).toBe(10)
    await new Promise((resolve) => setImmediate(resolve))
    expect(started).toHaveLength(2 * CALLS_IN_FLIGHT + 2)
    calls[2]?.reject(new Error('Redis said no'))
    await expect(outcomes[2]).rejects.toThrow('Redis said no')
    for (const [i, call] of calls.entries()) call.resolve(i)
    const settled = await Promise.allSettled(outcomes)
    expect(started).toEqual(calls.map((_, i) => i))
    expect(settled.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : 'rejected'))).toEqual([
      10,
      'rejected',
      'rejected',
      ...calls.slice(3).map((_, i) => i + 3),
    ])
  })
})

// syncTimeoutMs once bounded a whole sync: a healthy Redis carrying a sync of many keys, longer
// than the interval, was reported failing at every sync, and after outage.afterMs its keys
// followed the outage policy. It bounds Redis's silence now.
describe('a sync longer than syncTimeoutMs', () => {
  let server: SpawnedRedis
  let client: Redis
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
  }, 30_000)
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })

  it('is no failure while its calls keep answering, and the store stays synced', async () => {
    const KEYS = 120_000
    const clock = new ManualClock(1_763_700_000_000)
    const store = new HybridStore({
      client,
      clock: clock.now,
      autoSync: false,
      syncTimeoutMs: 150,
      onWarning: () => {},
    })
    const limiter = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1h' }] } },
      onWarning: () => {},
    })
    for (let i = 0; i < KEYS; i++) await limiter.consume('r', `user:${i}`)
    const report = await store.syncNow()
    // Real time: a sync of this many keys takes Redis several times syncTimeoutMs.
    expect(report.durationMs).toBeGreaterThan(150)
    expect(report.error).toBeUndefined()
    expect(report.keys).toBe(KEYS)
    expect(store.stats()).toMatchObject({ mode: 'synced', dirtyKeys: 0 })
    expect(await client.dbsize()).toBeGreaterThanOrEqual(KEYS)
    await limiter.close()
  }, 60_000)
})
