import { createLimiter, HybridStore, type Limiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 60_000)
const rules = { r: { algorithm: 'fixed-window', windows: [{ limit: 30, period: '1m' }] } } satisfies RulesOptions

// Redis stopped with SIGSTOP answers nothing and refuses nothing: the harshest outage for a
// client, which only a bounded wait notices. Time for decisions moves only when the test moves it;
// a sync's bounded wait is real time, kept short here.
describe('HybridStore through an outage', () => {
  let server: SpawnedRedis
  let client: Redis
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
  }, 30_000)
  afterAll(async () => {
    server?.kill('SIGCONT')
    client?.disconnect()
    await server?.stop()
  })

  function fleet(policy: 'local-share' | 'local' | 'local-full' | 'allow' | 'deny', prefix: string) {
    const clock = new ManualClock(T0)
    const warnings: string[] = []
    const stores = [0, 1, 2].map(
      () =>
        new HybridStore({
          client,
          prefix,
          clock: clock.now,
          autoSync: false,
          syncTimeoutMs: 200,
          outage: { policy },
          onWarning: (_, code) => warnings.push(code),
        }),
    )
    const limiters: Limiter[] = stores.map((store) => createLimiter({ store, rules, onWarning: () => {} }))
    return { clock, stores, limiters, warnings }
  }

  async function consumeAll(limiter: Limiter, times: number) {
    const reasons: string[] = []
    for (let i = 0; i < times; i++) reasons.push((await limiter.consume('r', 'ip:9')).reason)
    return reasons
  }

  it('keeps deciding on its share, warns once, and lands every unit when Redis is back', async () => {
    const { clock, stores, limiters, warnings } = fleet('local-share', 'outage1:')
    const [a] = stores as [HybridStore]
    const [limiter] = limiters as [Limiter]
    const counted: Array<number | undefined> = []
    for (const store of stores) counted.push((await store.syncNow()).instances)
    // Each heartbeat counts the processes that synced within the last three intervals.
    expect(counted).toEqual([1, 2, 3])
    expect((await a.syncNow()).instances).toBe(3)
    expect(await consumeAll(limiter, 5)).toEqual(Array(5).fill('ok'))
    expect((await a.syncNow()).error).toBeUndefined()

    server.kill('SIGSTOP')
    expect(await consumeAll(limiter, 2)).toEqual(['ok', 'ok'])
    const failed = await a.syncNow()
    expect(failed.error?.message).toMatch(/the sync heard nothing from Redis for 200 ms/)
    expect(a.stats()).toMatchObject({ mode: 'synced', dirtyKeys: 1 })

    // Past outage.afterMs (3 × 1000 ms) without a good sync: each of the 3 processes admits
    // ⌈30 ÷ 3⌉ = 10 on its own count.
    clock.advance(3_001)
    expect(a.stats().mode).toBe('degraded')
    const during = await consumeAll(limiter, 12)
    expect(during).toEqual(Array(12).fill('local-fallback'))
    const last = await limiter.consume('r', 'ip:9')
    expect(last).toMatchObject({ allowed: false, reason: 'local-fallback' })
    expect(last.error?.message).toMatch(/no sync has reached Redis for 3001 ms/)
    expect(warnings).toEqual(['TG_HYBRID_DEGRADED'])

    server.kill('SIGCONT')
    // The push under way when Redis stopped lands first; the units of the outage at the next sync.
    expect((await a.syncNow()).error).toBeUndefined()
    expect((await a.syncNow()).error).toBeUndefined()
    expect(a.stats()).toMatchObject({ mode: 'synced', dirtyKeys: 0 })
    expect(warnings).toEqual(['TG_HYBRID_DEGRADED', 'TG_HYBRID_RECOVERED'])
    const redis = createLimiter({ store: new RedisStore({ client, prefix: 'outage1:', clock: clock.now }), rules })
    expect((await redis.peek('r', 'ip:9')).windows[0]?.remaining).toBe(30 - 5 - 2 - 10)
    expect((await limiter.consume('r', 'ip:9')).reason).toBe('ok')
    await Promise.all([...limiters, redis].map((l) => l.close()))
  }, 30_000)

  it.each([
    ['local', 'local-fallback', 30],
    // Its former name, still taken.
    ['local-full', 'local-fallback', 30],
    ['allow', 'store-error-allowed', 40],
    ['deny', 'store-error-denied', 0],
  ] as const)(
    'outage policy %s decides with reason %s',
    async (policy, reason, admitted) => {
      const { clock, stores, limiters } = fleet(policy, `outage-${policy}:`)
      for (const store of stores) await store.syncNow()
      server.kill('SIGSTOP')
      try {
        // An outage is a sync that fails, not time alone.
        expect((await (stores[0] as HybridStore).syncNow()).error).toBeDefined()
        clock.advance(3_001)
        const [limiter] = limiters as [Limiter]
        let passed = 0
        for (let i = 0; i < 40; i++) {
          const decision = await limiter.consume('r', 'ip:9')
          expect(decision.reason).toBe(reason)
          if (decision.allowed) passed++
        }
        expect(passed).toBe(admitted)
      } finally {
        server.kill('SIGCONT')
      }
      for (const store of stores) await store.syncNow()
      await Promise.all(limiters.map((l) => l.close()))
    },
    30_000,
  )
})

// The outage policy's counts had no bound: with Redis unreachable, maxTrackedKeys 1,000 and a
// one-hour window, a million identifiers took the heap to 293 MB while trackedKeys said 1,000.
describe('HybridStore through an outage met by a flood of identifiers', () => {
  it('holds at most maxTrackedKeys counts of its own, and says so in trackedKeys', async () => {
    // Nothing listens there: no sync can reach Redis, and none is tried (autoSync off).
    const client = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true })
    const clock = new ManualClock(T0)
    const store = new HybridStore({
      client,
      clock: clock.now,
      autoSync: false,
      maxTrackedKeys: 1_000,
      syncTimeoutMs: 50,
      outage: { policy: 'local', afterMs: 1_000 },
      onWarning: () => {},
    })
    const limiter = createLimiter({
      store,
      rules: { r: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1h' }] } },
      onWarning: () => {},
    })
    expect((await store.syncNow()).error).toBeDefined()
    clock.advance(1_001)
    for (let i = 0; i < 20_000; i++) {
      const decision = await limiter.consume('r', `ip:10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
      expect(decision.reason).toBe('local-fallback')
    }
    // 1,000 it decides and syncs, and 1,000 counts of the outage's own.
    expect(store.stats().trackedKeys).toBe(2_000)
    // Still limiting: a key hammered now is held to the limit.
    const hammered = []
    for (let i = 0; i < 10; i++) hammered.push((await limiter.consume('r', 'ip:203.0.113.7')).allowed)
    expect(hammered.filter(Boolean)).toHaveLength(5)
    await limiter.close()
    client.disconnect()
  })
})
