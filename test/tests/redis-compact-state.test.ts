import {
  type AlgorithmName,
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  RedisStore,
  type RulesOptions,
  type Store,
  type StoreTarget,
  type WindowOptions,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'
import { keysWithTtl } from '../src/redis-keys.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'
import { seededRandom } from '../src/seeded-random.js'
import { keysWithoutTtl } from '../src/ttl-audit.js'

const COUNTERS = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const satisfies AlgorithmName[]
const ID = 'ip:10.0.12.123'
/** The state name the limiters of edited rules share (sharedStateLimiter). */
const SHARED = 'r'
const HUNDRED_PER_MINUTE: WindowOptions = { limit: 100, period: '1m' }
// What a key with an int-encoded value costs on Redis 7.0 for a key name of this length
// (`tg:r@<4 characters>:{ip:10.0.12.123}:fw`, 29 characters).
const INT_KEY_BYTES = 72
// 300 ms before a minute boundary, so that 50 hits 10 ms apart cross it.
const T0 = 1_763_700_059_700

/** The value after one hit at T0 + 10: the entry's numbers, then the lengths of all but the first. */
const FIRST_HIT_VALUE: Readonly<Record<(typeof COUNTERS)[number], string>> = {
  // The addable form: the window's end, 1763700060000 (the key's expiry), in seconds × 1,000,000, plus count 1, negated.
  'fixed-window': '-1763700060000001',
  // The expiry, the end of the next window (the count weighs on it), current count 1, previous 0.
  'sliding-window': '1763700120000' + '1' + '0' + '1' + '1',
  // Measured at T0 + 10, 600 units short of full: a token is 600 units when 100 refill per 60000 ms.
  'token-bucket': '1763700059710' + '600' + '3',
  gcra: '1763700059710' + '600' + '3',
}

describe('RedisStore keeps a one-window counter in one int-encoded integer', () => {
  // A server of its own, so that keys carry the default prefix and MEMORY USAGE is a realistic key's.
  let server: SpawnedRedis
  let client: Redis
  const limiters: Limiter[] = []

  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url, { maxRetriesPerRequest: 1 })
  }, 30_000)
  afterAll(async () => {
    await Promise.all(limiters.map((limiter) => limiter.close()))
    await client?.quit()
    await server?.stop()
  })

  function redisLimiter(clock: ManualClock, rules: RulesOptions, prefix?: string): Limiter {
    // The script's answers over edited state are the subject: none is held in the process.
    const limiter = createLimiter({
      store: new RedisStore({ client, clock: clock.now, prefix, refusalCache: false }),
      rules,
    })
    limiters.push(limiter)
    return limiter
  }

  /**
   * A limiter whose rule keeps its state under SHARED, whatever its shape. A limiter names a
   * rule's state by its shape (`r@<digest>`), so that an edit of its periods starts fresh; a
   * store's caller that names the state itself can still give the script state another shape
   * wrote, as every edit in code did before, and the script must decide right over it.
   */
  function sharedStateLimiter(clock: ManualClock, rules: RulesOptions, prefix: string): Limiter {
    const store = new RedisStore({ client, clock: clock.now, prefix, refusalCache: false })
    const shared = (targets: readonly StoreTarget[]) => targets.map((target) => ({ ...target, rule: SHARED }))
    const underOneName: Store = {
      evaluate: (request) => store.evaluate({ ...request, targets: shared(request.targets) }),
      reset: (targets) => store.reset(shared(targets)),
      close: () => store.close(),
    }
    const limiter = createLimiter({ store: underOneName, rules })
    limiters.push(limiter)
    return limiter
  }

  function memoryLimiter(clock: ManualClock, rules: RulesOptions): Limiter {
    const limiter = createLimiter({ store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), rules })
    limiters.push(limiter)
    return limiter
  }

  /** The key of ID's state under `rule`: a limiter's `stateName` of its rule, or SHARED. */
  function keyOf(algorithm: AlgorithmName, prefix: string | undefined, rule: string): string {
    return new RedisStore({ client, prefix }).keyOf({ rule, algorithm, windows: [], identifier: ID })
  }

  const stateOf = (limiter: Limiter) => limiter.rules.get('r')!.stateName

  async function stored(key: string) {
    const [value, encoding, bytes, ttlMs] = await Promise.all([
      client.get(key),
      client.object('ENCODING', key),
      client.call('MEMORY', 'USAGE', key) as Promise<number>,
      client.pttl(key),
    ])
    return { value, encoding, bytes, ttlMs }
  }

  async function same(redis: Promise<Decision>, memory: Promise<Decision>, what: string): Promise<Decision> {
    const [fromRedis, fromMemory] = await Promise.all([redis, memory])
    expect(fromRedis, what).toEqual(fromMemory)
    return fromRedis
  }

  it.each(COUNTERS)(
    `%s at 100 per minute: ${INT_KEY_BYTES} bytes after 1 and after 50 hits, deciding as MemoryStore`,
    async (algorithm) => {
      const clock = new ManualClock(T0)
      const rules = { r: { algorithm, windows: [HUNDRED_PER_MINUTE] } }
      const redis = redisLimiter(clock, rules)
      const memory = memoryLimiter(clock, rules)
      const key = keyOf(algorithm, undefined, stateOf(redis))
      expect(key).toMatch(/^tg:r@[A-Za-z0-9_-]{4}:\{ip:10\.0\.12\.123\}:[a-z]{2}$/)

      for (let hit = 1; hit <= 50; hit++) {
        clock.advance(10)
        const decision = await same(redis.consume('r', ID), memory.consume('r', ID), `hit ${hit}`)
        expect(decision.allowed).toBe(true)
        if (hit === 1) expect((await stored(key)).value).toBe(FIRST_HIT_VALUE[algorithm])
        if (hit === 1 || hit === 50) {
          const { encoding, bytes, ttlMs } = await stored(key)
          expect({ hit, encoding, ttl: ttlMs > 0 }).toEqual({ hit, encoding: 'int', ttl: true })
          expect(bytes, `MEMORY USAGE after ${hit} hits`).toBeLessThanOrEqual(INT_KEY_BYTES)
        }
      }
      // Peeks, refunds and the minute after read the compact state back exactly as MemoryStore keeps it.
      await same(redis.peek('r', ID, { cost: 3 }), memory.peek('r', ID, { cost: 3 }), 'peek')
      await same(redis.refund('r', ID, { cost: 7 }), memory.refund('r', ID, { cost: 7 }), 'refund')
      clock.advance(45_000)
      await same(redis.consume('r', ID, { cost: 60 }), memory.consume('r', ID, { cost: 60 }), 'consume 45 s later')
      expect((await stored(key)).encoding).toBe('int')
    },
  )

  it.each(COUNTERS)(
    '%s: a rule edited between one and two windows keeps counting its first window',
    async (algorithm) => {
      const clock = new ManualClock(T0)
      const prefix = 'edited:'
      const one = sharedStateLimiter(clock, { r: { algorithm, windows: [HUNDRED_PER_MINUTE] } }, prefix)
      const two = sharedStateLimiter(
        clock,
        { r: { algorithm, windows: [HUNDRED_PER_MINUTE, { limit: 1000, period: '1h' }] } },
        prefix,
      )
      const key = keyOf(algorithm, prefix, SHARED)

      for (let hit = 1; hit <= 20; hit++) {
        const byOne = hit % 2 === 1
        const decision = await (byOne ? one : two).consume('r', ID, { cost: 2 })
        expect(decision.allowed, `hit ${hit}`).toBe(true)
        expect(decision.windows[0]?.remaining, `hit ${hit}`).toBe(100 - 2 * hit)
        if (!byOne) {
          // What the one-window rule wrote carries over to the first window only: the hour starts fresh.
          expect(decision.windows[1]?.remaining, `hit ${hit}`).toBe(1000 - 2)
        }
        const { value, encoding, ttlMs } = await stored(key)
        expect({ hit, textual: value?.includes(':'), int: encoding === 'int', ttl: ttlMs > 0 }).toEqual({
          hit,
          textual: !byOne,
          int: byOne,
          ttl: true,
        })
      }
    },
  )

  it.each(COUNTERS)(
    '%s: values past 9 digits fall back to the textual form and still decide right',
    async (algorithm) => {
      // Window-aligned: 1763700000000 is a multiple of the period.
      const clock = new ManualClock(1_763_700_001_000)
      const prefix = 'large:'
      // A token is one unit of level here (gcd = period), and every charge leaves a deficit or a
      // window that lasts minutes, so no key expires in real time while its state still matters.
      const rules = { r: { algorithm, windows: [{ limit: 2 * 10 ** 9, period: 4_000_000 }] } }
      const redis = redisLimiter(clock, rules, prefix)
      const memory = memoryLimiter(clock, rules)
      const key = keyOf(algorithm, prefix, stateOf(redis))
      const steps: Array<[jump: number, cost: number]> = [
        [0, 1.5 * 10 ** 9],
        [1_000, 3 * 10 ** 8],
        [4_000_000, 3 * 10 ** 8],
        [8_000_000, 10 ** 9],
        [0, 1],
        [4_000_000, 999_999_999],
        [12_000_000, 2 * 10 ** 9],
        [12_000_000, 5 * 10 ** 8],
      ]
      const forms = new Set<string>()
      for (const [step, [jump, cost]] of steps.entries()) {
        clock.advance(jump)
        await same(redis.consume('r', ID, { cost }), memory.consume('r', ID, { cost }), `step ${step}: cost ${cost}`)
        await same(redis.peek('r', ID), memory.peek('r', ID), `step ${step}: peek`)
        const { value, ttlMs } = await stored(key)
        if (value !== null) forms.add(value.includes(':') ? 'textual' : 'compact')
        expect(ttlMs, `step ${step}`).toBeGreaterThan(0)
      }
      expect([...forms].sort()).toEqual(['compact', 'textual'])
    },
  )

  it('reads the compact value earlier versions wrote for a fixed window, and writes it back addable', async () => {
    const clock = new ManualClock(T0)
    const prefix = 'earlier:'
    const rules = { r: { algorithm: 'fixed-window', windows: [HUNDRED_PER_MINUTE] } } as const
    const redis = redisLimiter(clock, rules, prefix)
    const key = keyOf('fixed-window', prefix, stateOf(redis))
    // 42 counted in the window ending at T0's minute's end, as earlier versions kept it.
    const ends = T0 - (T0 % 60_000) + 60_000
    await client.set(key, `${ends}422`, 'PX', ends - T0)
    const decision = await redis.consume('r', ID)
    expect(decision.windows[0]?.remaining).toBe(100 - 43)
    expect(await stored(key)).toMatchObject({ value: String(-((ends / 1000) * 1_000_000 + 43)), encoding: 'int' })
    expect((await stored(key)).ttlMs).toBeGreaterThan(0)
  })

  it('reads a count of exactly 9 digits from a compact value too long for Redis to int-encode', async () => {
    const clock = new ManualClock(T0)
    const prefix = 'nine:'
    const rules = { r: { algorithm: 'fixed-window', windows: [{ limit: 2 * 10 ** 9, period: 4_000_000 }] } } as const
    const redis = redisLimiter(clock, rules, prefix)
    const memory = memoryLimiter(clock, rules)
    for (const cost of [999_999_998, 1]) {
      await same(redis.consume('r', ID, { cost }), memory.consume('r', ID, { cost }), `cost ${cost}`)
    }
    expect(await stored(keyOf('fixed-window', prefix, stateOf(redis)))).toMatchObject({
      value: '1763704000000' + '999999999' + '9',
      encoding: 'embstr',
    })
    await same(redis.consume('r', ID), memory.consume('r', ID), 'one more, now textual')
    expect((await stored(keyOf('fixed-window', prefix, stateOf(redis)))).value).toContain(':')
  })

  it.each(COUNTERS)(
    '%s: edits of limit and period never break a decision or the remaining count',
    async (algorithm) => {
      const clock = new ManualClock(T0)
      const prefix = 'periods:'
      const shapes: WindowOptions[] = [
        HUNDRED_PER_MINUTE,
        { limit: 7, period: '1m' },
        { limit: 100, period: '1s' },
        { limit: 3, period: '1h' },
        { limit: 1000, period: '7s' },
      ]
      const edits = shapes.map((window) => sharedStateLimiter(clock, { r: { algorithm, windows: [window] } }, prefix))
      const random = seededRandom(COUNTERS.indexOf(algorithm) + 11)
      for (let step = 0; step < 300; step++) {
        clock.advance(random(3) === 0 ? random(5_000) : random(50))
        const shape = random(shapes.length)
        const decision = await (edits[shape] as Limiter).consume('r', ID, { cost: 1 + random(3) })
        const what = `step ${step}, shape ${shape}`
        expect(decision.reason, what).toMatch(/^(ok|limited)$/)
        for (const window of decision.windows) {
          expect(Number.isInteger(window.remaining), what).toBe(true)
          expect(window.remaining, what).toBeGreaterThanOrEqual(0)
          expect(window.remaining, what).toBeLessThanOrEqual(window.limit)
          expect(window.resetAtMs, what).toBeGreaterThanOrEqual(decision.nowMs)
        }
        expect(decision.retryAfterMs, what).toBeGreaterThanOrEqual(0)
      }
    },
  )

  // A fixed or sliding window's compact value starts with the key's own expiry, so a charge that
  // keeps it leaves the TTL as it is (SET KEEPTTL), and any other write sets the TTL anew.
  it.each(['fixed-window', 'sliding-window'] as const)(
    '%s: a charge within the window keeps the TTL the window set; an edited period sets its own',
    async (algorithm) => {
      // A minute's first millisecond: its 10-second and 1-minute windows start together.
      const clock = new ManualClock(1_763_700_000_000)
      const prefix = 'expiry:'
      const key = keyOf(algorithm, prefix, SHARED)
      const tenSeconds = sharedStateLimiter(
        clock,
        { r: { algorithm, windows: [{ limit: 100, period: '10s' }] } },
        prefix,
      )
      const minute = sharedStateLimiter(clock, { r: { algorithm, windows: [HUNDRED_PER_MINUTE] } }, prefix)
      // A sliding window's count weighs on the next window too: its key lives two periods.
      const periods = algorithm === 'fixed-window' ? 1 : 2
      const ttl = async () => (await stored(key)).ttlMs

      await tenSeconds.consume('r', ID)
      expect(await ttl()).toBeGreaterThan(periods * 10_000 - 1_000)
      clock.advance(5_000)
      await tenSeconds.consume('r', ID)
      // Rewritten, the TTL would be 5 s shorter: the writer's clock moved on, the expiry did not.
      expect(await ttl()).toBeGreaterThan(periods * 10_000 - 1_000)

      // Edited to a minute: the count carries on into the minute that holds the 10-second window,
      // whose expiry is the minute's, not the one the key had.
      const decision = await minute.consume('r', ID)
      if (algorithm === 'fixed-window') expect(decision.windows[0]?.remaining).toBe(97)
      expect(await ttl()).toBeGreaterThan(periods * 60_000 - 5_000 - 1_000)
      expect(await ttl()).toBeLessThanOrEqual(periods * 60_000 - 5_000)
    },
  )

  it('leaves no key without a TTL', async () => {
    expect((await keysWithTtl(client, '')).length).toBeGreaterThan(10)
    expect(await keysWithoutTtl(client)).toEqual([])
  })
})
