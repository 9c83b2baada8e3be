import { fileURLToPath } from 'node:url'
import { ALGORITHMS, createLimiter, type Decision, HybridStore, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import type { FloodResult, FloodRound } from '../src/flood-round.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'
import { scriptCalls } from '../src/script-calls.js'
import { WorkerPool } from '../src/worker-pool.js'

const worker = fileURLToPath(new URL('../src/flood-worker.ts', import.meta.url))
const STORE_FAILURES = ['store-error-allowed', 'store-error-denied', 'local-fallback', 'overloaded']

function total(results: readonly FloodResult[], reason: string): number {
  return results.reduce((sum, result) => sum + (result[reason] ?? 0), 0)
}

function failures(results: readonly FloodResult[]): Record<string, number> {
  return Object.fromEntries(STORE_FAILURES.map((reason) => [reason, total(results, reason)]))
}

// A burst far above the limit, with Redis healthy and every option at its default: a burst once
// read as a store failure (the bound counted time queued in the process), so that thousands of
// decisions failed open. Every decision must now be Redis's, and exactly the limit admitted.
describe('a flood of concurrent decisions on a healthy Redis (4 processes)', () => {
  // A server of its own: the subject is these processes' decisions, not other tests' traffic.
  let server: SpawnedRedis
  let pool: WorkerPool
  let round = 0
  beforeAll(async () => {
    server = await spawnRedisServer()
    pool = new WorkerPool(worker, [server.url], 4)
    // Each process connected and its script loaded, as a server is once it serves: a process's
    // very first command waits for its connection, whose set-up is not the subject here.
    await flood({ algorithm: 'fixed-window', limit: 1, decisions: 1, identifiers: 'one', refusalCache: true })
  }, 30_000)
  afterAll(async () => {
    await pool?.close()
    await server?.stop()
  })

  function flood(shape: Omit<FloodRound, 'prefix'>): Promise<FloodResult[]> {
    return pool.broadcast<FloodResult>(JSON.stringify({ ...shape, prefix: `flood:${process.pid}:${round++}:` }))
  }

  it.each(ALGORITHMS)(
    '%s: 4 × 5,000 at once on one identifier, 1,000 per hour: exactly 1,000 admitted, no store failure',
    async (algorithm) => {
      const results = await flood({ algorithm, limit: 1_000, decisions: 5_000, identifiers: 'one', refusalCache: true })
      expect(failures(results)).toEqual({
        'store-error-allowed': 0,
        'store-error-denied': 0,
        'local-fallback': 0,
        overloaded: 0,
      })
      expect(total(results, 'ok')).toBe(1_000)
      expect(total(results, 'limited')).toBe(19_000)
    },
  )

  it('the same without the refusal cache: every decision goes to Redis, and still none fails', async () => {
    const results = await flood({
      algorithm: 'token-bucket',
      limit: 1_000,
      decisions: 5_000,
      identifiers: 'one',
      refusalCache: false,
    })
    expect(failures(results)).toEqual({
      'store-error-allowed': 0,
      'store-error-denied': 0,
      'local-fallback': 0,
      overloaded: 0,
    })
    expect(total(results, 'ok')).toBe(1_000)
  })

  it('4 × 10,000 at once on 10,000 identifiers at 1 per hour: exactly one admitted each, no store failure', async () => {
    const results = await flood({
      algorithm: 'fixed-window',
      limit: 1,
      decisions: 10_000,
      identifiers: 'distinct',
      refusalCache: true,
    })
    expect(failures(results)).toEqual({
      'store-error-allowed': 0,
      'store-error-denied': 0,
      'local-fallback': 0,
      overloaded: 0,
    })
    expect(total(results, 'ok')).toBe(10_000)
    expect(total(results, 'limited')).toBe(30_000)
  })
})

describe('a process too busy to read its replies in time', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  // Timers run before the event loop reads its sockets: a turn that kept the process busy past
  // the bound once failed every decision waiting, although Redis had answered them all.
  it('decides by Redis every decision asked before a turn that blocks the event loop for three times the bound', async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `busy:${process.pid}:` }),
      rules: { r: { windows: [{ limit: 500, period: '1h' }] } },
      storeTimeoutMs: 50,
      onWarning: () => {},
    })
    const asked = Array.from({ length: 2_000 }, (_, i) => limiter.consume('r', `ip:${i % 4}`))
    const blockedUntil = performance.now() + 150
    while (performance.now() < blockedUntil) {
      // The process is busy: nothing else runs, and Redis's replies wait in the socket.
    }
    const made = await Promise.all(asked)
    expect(new Set(made.map((decision) => decision.reason))).toEqual(new Set(['ok']))
    await limiter.close()
  })
})

describe('a strict HybridStore under a flood of first-time identifiers', () => {
  // A server of its own: the subject is this process's round trips, not other tests' traffic.
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

  // Each first-time identifier needs a lease round trip; 500 of them at once once outlasted the
  // bound, counted from each decision's start, and those decisions failed open. The bound here is
  // 500 ms: the suite's other files share the machine's two cores, and a Redis descheduled that
  // long is, to its clients, silent; 5,000 round trips at once take longer than that to answer.
  it('decides 5,000 first-time identifiers at once by Redis, within each limit', async () => {
    const store = new HybridStore({
      client,
      prefix: `strict-flood:${process.pid}:`,
      consistency: 'strict',
      autoSync: false,
    })
    const limiter = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1h' }] } },
      storeTimeoutMs: 500,
      onWarning: () => {},
    })
    // Connected, its script loaded, as a serving process is.
    expect((await limiter.consume('r', 'ip:warm')).reason).toBe('ok')
    const made = await Promise.all(Array.from({ length: 10_000 }, (_, i) => limiter.consume('r', `ip:${i % 5_000}`)))
    const reasons: Record<string, number> = {}
    for (const decision of made) reasons[decision.reason] = (reasons[decision.reason] ?? 0) + 1
    const failed = made.find((decision) => decision.error !== undefined)
    expect(reasons, `the first failure: ${failed?.error?.message}`).toEqual({ ok: 5_000, limited: 5_000 })
    await limiter.close()
  })
})

describe('the backlog bound', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it("refuses past backlog.max with reason 'overloaded', never lets one through, and warns once", async () => {
    const warnings: string[] = []
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `backlog-refuse:${process.pid}:` }),
      rules: { r: { windows: [{ limit: 1_000_000, period: '1h' }] } },
      backlog: { max: 100 },
      onWarning: (_message, code) => warnings.push(code),
    })
    const made = await Promise.all(Array.from({ length: 1_000 }, (_, i) => limiter.consume('r', `ip:${i}`)))
    expect(made.filter((d) => d.reason === 'ok')).toHaveLength(100)
    const overloaded = made.filter((d) => d.reason === 'overloaded')
    expect(overloaded).toHaveLength(900)
    expect(overloaded[0]).toMatchObject({ allowed: false, retryAfterMs: 1_000, windows: [] })
    expect(warnings).toEqual(['TG_BACKLOG_FULL'])
    // Room again once the backlog drained.
    expect((await limiter.consume('r', 'ip:later')).reason).toBe('ok')
    await limiter.close()
  })

  // Thousands queued: the queue is drained oldest first, and taken calls are cut off it in bulk
  // (support/fifo.ts) several times over.
  it("with whenFull 'wait', queues past backlog.max and decides every one by Redis, in order", async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `backlog-wait:${process.pid}:`, refusalCache: false }),
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 2_500, period: '1h' }] } },
      backlog: { max: 100, whenFull: 'wait' },
      onWarning: () => {},
    })
    const made: Decision[] = await Promise.all(Array.from({ length: 5_000 }, () => limiter.consume('r', 'ip:1')))
    expect(made.slice(0, 2_500).every((d) => d.reason === 'ok')).toBe(true)
    expect(made.slice(2_500).every((d) => d.reason === 'limited')).toBe(true)
    // Each admitted decision saw one unit fewer than the one before it: Redis took them in call order.
    expect(made.slice(0, 2_500).map((d) => d.windows[0]?.remaining)).toEqual(
      Array.from({ length: 2_500 }, (_, i) => 2_499 - i),
    )
    await limiter.close()
  })

  it('names the option and the value when backlog is wrong', () => {
    expect(() =>
      createLimiter({ rules: { r: { windows: [{ limit: 1, period: '1s' }] } }, backlog: { max: 0 } }),
    ).toThrow('createLimiter option backlog.max must be an integer from 1 to 10000000, got 0')
    expect(() =>
      createLimiter({
        rules: { r: { windows: [{ limit: 1, period: '1s' }] } },
        backlog: { whenFull: 'drop' as never },
      }),
    ).toThrow(`createLimiter option backlog.whenFull must be 'refuse' or 'wait', got "drop"`)
  })
})

describe('refusals answered in the process (RedisStore refusal cache)', () => {
  let server: SpawnedRedis
  let client: Redis
  let other: Redis
  let made = 0
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
    other = new Redis(server.url)
  }, 30_000)
  afterAll(async () => {
    client?.disconnect()
    other?.disconnect()
    await server?.stop()
  })

  function limiterOn(redis: Redis, clock: { now: number }, options: { refusalCache?: false } = {}, prefix?: string) {
    const store = new RedisStore({
      client: redis,
      prefix: prefix ?? `refusals:${made++}:`,
      clock: () => clock.now,
      ...options,
    })
    return createLimiter({ store, rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '1m' }] } } })
  }

  const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000)

  it('costs Redis one round trip per maxHoldMs for a client hammering a key it is refused on', async () => {
    const clock = { now: T0 }
    const limiter = limiterOn(client, clock)
    for (let i = 0; i < 3; i++) expect((await limiter.consume('r', 'ip:1')).reason).toBe('ok')
    const first = await limiter.consume('r', 'ip:1')
    expect(first).toMatchObject({ reason: 'limited', retryAfterMs: 60_000 })
    const before = await scriptCalls(client)
    const hammered = await Promise.all(Array.from({ length: 10_000 }, () => limiter.consume('r', 'ip:1')))
    expect(hammered.every((d) => d.reason === 'limited')).toBe(true)
    clock.now = T0 + 999
    const held = await limiter.consume('r', 'ip:1')
    expect(held).toMatchObject({ reason: 'limited', retryAfterMs: 59_001, nowMs: T0 + 999 })
    expect(held.windows).toEqual([expect.objectContaining({ remaining: 0, failed: true, resetAtMs: T0 + 60_000 })])
    expect(await scriptCalls(client)).toBe(before)
    // The hold ends: Redis is asked once, refuses again, and the refusal is held again.
    clock.now = T0 + 1_000
    for (let i = 0; i < 100; i++) expect((await limiter.consume('r', 'ip:1')).reason).toBe('limited')
    expect(await scriptCalls(client)).toBe(before + 1)
    clock.now = T0 + 60_000
    expect((await limiter.consume('r', 'ip:1')).reason).toBe('ok')
    expect(await scriptCalls(client)).toBe(before + 2)
    await limiter.close()
  })

  it('asks Redis for a smaller cost than the one refused', async () => {
    const clock = { now: T0 }
    const limiter = limiterOn(client, clock)
    expect((await limiter.consume('r', 'ip:1', { cost: 2 })).reason).toBe('ok')
    expect((await limiter.consume('r', 'ip:1', { cost: 2 })).reason).toBe('limited')
    expect((await limiter.consume('r', 'ip:1', { cost: 3 })).reason).toBe('limited')
    expect((await limiter.consume('r', 'ip:1', { cost: 1 })).reason).toBe('ok')
    await limiter.close()
  })

  it('forgets a refusal at once when this process refunds or resets the key', async () => {
    const clock = { now: T0 }
    const limiter = limiterOn(client, clock)
    for (let i = 0; i < 3; i++) await limiter.consume('r', 'ip:1')
    expect((await limiter.consume('r', 'ip:1')).reason).toBe('limited')
    await limiter.refund('r', 'ip:1')
    expect((await limiter.consume('r', 'ip:1')).reason).toBe('ok')
    expect((await limiter.consume('r', 'ip:1')).reason).toBe('limited')
    await limiter.reset('r', 'ip:1')
    expect((await limiter.consume('r', 'ip:1')).reason).toBe('ok')
    await limiter.close()
  })

  // The one way it differs from asking Redis, as documented.
  it('keeps refusing for up to maxHoldMs when another process resets the key meanwhile', async () => {
    const clock = { now: T0 }
    const prefix = `refusals-shared:${made++}:`
    const cached = limiterOn(client, clock, {}, prefix)
    const uncached = limiterOn(client, clock, { refusalCache: false }, prefix)
    const elsewhere = limiterOn(other, clock, {}, prefix)
    for (let i = 0; i < 3; i++) await cached.consume('r', 'ip:1')
    expect((await cached.consume('r', 'ip:1')).reason).toBe('limited')
    expect((await uncached.consume('r', 'ip:1')).reason).toBe('limited')
    await elsewhere.reset('r', 'ip:1')
    expect((await cached.consume('r', 'ip:1')).reason).toBe('limited')
    expect((await uncached.consume('r', 'ip:1')).reason).toBe('ok')
    clock.now = T0 + 999
    expect((await cached.consume('r', 'ip:1')).reason).toBe('limited')
    clock.now = T0 + 1_000
    expect((await cached.consume('r', 'ip:1')).reason).toBe('ok')
    await Promise.all([cached.close(), uncached.close(), elsewhere.close()])
  })

  // A refusal Redis gave before a refund sent beside it no longer holds once the refund ran.
  it('does not keep a refusal whose request went out beside a refund of the same key', async () => {
    const clock = { now: T0 }
    const limiter = limiterOn(client, clock)
    for (let i = 0; i < 3; i++) await limiter.consume('r', 'ip:1')
    const [refused] = await Promise.all([limiter.consume('r', 'ip:1'), limiter.refund('r', 'ip:1')])
    expect(refused?.reason).toBe('limited')
    expect((await limiter.consume('r', 'ip:1')).reason).toBe('ok')
    await limiter.close()
  })

  // Identifiers may hold any character: two lists of them must never share a held refusal.
  it('keeps the refusals of several identifiers apart, whatever characters they hold', async () => {
    const clock = { now: T0 }
    const store = new RedisStore({ client, prefix: `refusals-apart:${made++}:`, clock: () => clock.now })
    const limiter = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }] } },
    })
    const first = ['x:a\nr\u0000x:c', 'x:b']
    const second = ['x:a', 'x:c\nr\u0000x:b']
    expect((await limiter.consume('r', first)).reason).toBe('ok')
    expect((await limiter.consume('r', first)).reason).toBe('limited')
    expect((await limiter.consume('r', second)).reason).toBe('ok')
    await limiter.close()
  })

  it('asks Redis again once a rule is given other windows under the same name', async () => {
    const clock = { now: T0 }
    const prefix = `refusals-rule:${made++}:`
    const store = new RedisStore({ client, prefix, clock: () => clock.now })
    const narrow = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '1m' }] } },
    })
    for (let i = 0; i < 3; i++) await narrow.consume('r', 'ip:1')
    expect((await narrow.consume('r', 'ip:1')).reason).toBe('limited')
    // The process after a deploy that raised the limit, beside the one before it: warned of on purpose.
    const wide = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1m' }] } },
      ignoreWarnings: ['TG_RULE_NAME_CLASH'],
    })
    expect((await wide.consume('r', 'ip:1')).reason).toBe('ok')
    await Promise.all([narrow.close(), wide.close()])
  })

  it('holds at most maxEntries refusals: the oldest are asked of Redis again', async () => {
    const clock = { now: T0 }
    const store = new RedisStore({
      client,
      prefix: `refusals-bound:${made++}:`,
      clock: () => clock.now,
      refusalCache: { maxEntries: 10 },
    })
    const limiter = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }] } },
    })
    const ids = Array.from({ length: 100 }, (_, i) => `ip:${i}`)
    for (const id of ids) await limiter.consume('r', id)
    for (const id of ids) expect((await limiter.consume('r', id)).reason).toBe('limited')
    const before = await scriptCalls(client)
    for (const id of ids.slice(90)) await limiter.consume('r', id)
    expect(await scriptCalls(client)).toBe(before)
    for (const id of ids.slice(0, 10)) await limiter.consume('r', id)
    expect(await scriptCalls(client)).toBe(before + 10)
    await limiter.close()
  })

  it('names the option and the value when refusalCache is wrong', () => {
    expect(() => new RedisStore({ client, refusalCache: { maxEntries: 0 } })).toThrow(
      'RedisStore option refusalCache.maxEntries must be an integer from 1 to 10000000, got 0',
    )
    expect(() => new RedisStore({ client, refusalCache: true as never })).toThrow(
      'RedisStore option refusalCache must be false or an object { maxEntries, maxHoldMs }, got true',
    )
  })
})
