import {
  ALGORITHMS,
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  RedisStore,
  type RulesOptions,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'
import { seededRandom, seededUniform } from '../src/seeded-random.js'

const IDENTIFIERS = ['ip:203.0.113.7', 'user:42', 'ip:2001:db8::/56']

/**
 * A MemoryStore's limiter and a RedisStore's on the same clock and rules. Every decision asks
 * Redis (refusalCache: false): the script against the model is the subject.
 */
function memoryAndRedis(client: Redis, clock: ManualClock, rules: RulesOptions, prefix: string): Limiter[] {
  return [
    createLimiter({ store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), rules }),
    createLimiter({ store: new RedisStore({ client, clock: clock.now, prefix, refusalCache: false }), rules }),
  ]
}

describe('MemoryStore and RedisStore decide identically', () => {
  let client: Redis
  let splitting: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
    // A standalone server runs one script over keys of any slots. Flagged as a cluster, the
    // client makes the store split decisions by slot exactly as on a real Cluster (ioredis reads
    // the flag only for pipelines, which the store does not use), so consume-then-undo runs
    // against real Redis and must still decide like one atomic step.
    splitting = new Redis(inject('redisUrl'))
    ;(splitting as { isCluster: boolean }).isCluster = true
  })
  afterAll(async () => {
    await client.quit()
    await splitting.quit()
  })

  it.each(ALGORITHMS)('%s, over 800 random operations', async (algorithm) => {
    const clock = new ManualClock(1_700_000_000_123)
    const rules = {
      child: {
        algorithm,
        windows: [
          { limit: 9, period: '2s' },
          { limit: 18, period: '15s' },
        ],
        parent: 'root',
      },
      root: { algorithm, windows: [{ limit: 80, period: '30s' }] },
    } satisfies RulesOptions
    // Every decision asks Redis (refusalCache: false): the script against the model is the
    // subject, and a refusal held in the process keeps Redis's figures of that moment.
    // A split decision takes a round trip per slot; on a busy machine that can outlast the
    // default bound, and a timeout would be a difference in the decision, not in the state.
    const storeTimeoutMs = 30_000
    const limiters: Limiter[] = [
      createLimiter({ store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), rules }),
      createLimiter({
        store: new RedisStore({
          client,
          clock: clock.now,
          prefix: `equivalence:${process.pid}:${algorithm}:`,
          refusalCache: false,
        }),
        rules,
        storeTimeoutMs,
      }),
      createLimiter({
        store: new RedisStore({
          client: splitting,
          clock: clock.now,
          prefix: `split:${process.pid}:${algorithm}:`,
          refusalCache: false,
        }),
        rules,
        storeTimeoutMs,
      }),
    ]
    const random = seededRandom(ALGORITHMS.indexOf(algorithm) + 1)
    let splitRefusals = 0
    let longRefusals = 0
    for (let step = 0; step < 800; step++) {
      const jump = random(120) === 0 ? 40_000 : random(200)
      clock.advance(jump)
      const rule = random(4) === 0 ? 'root' : 'child'
      // user:42 comes far more often than either address, so its windows refuse while theirs have room.
      const ids = IDENTIFIERS.filter((_, k) => random(10) < (k === 1 ? 9 : 3))
      if (ids.length === 0) ids.push(IDENTIFIERS[random(3)] as string)
      const cost = random(10) === 0 ? 0 : 1 + random(4)
      // Resets are rare enough that the 15 s window fills.
      const operation =
        random(40) === 0
          ? 'reset'
          : ((['consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(5)] ?? 'peek')
      if (operation === 'reset') {
        await Promise.all(limiters.map((limiter) => limiter.reset(rule, ids)))
        continue
      }
      const [local, redis, split] = (await Promise.all(
        limiters.map((limiter) => limiter[operation](rule, ids, { cost })),
      )) as [Decision, Decision, Decision]
      const what = `step ${step}: ${operation} ${rule} ${ids.join(',')} cost ${cost}`
      expect(redis, what).toEqual(local)
      expect(split, `${what}, split by slot`).toEqual(local)
      if (operation === 'consume' && !local.allowed && local.windows.some((w) => !w.failed)) splitRefusals++
      if (local.windows.some((w) => w.failed && w.periodMs === 15_000)) longRefusals++
    }
    // The 15 s window refuses on its own too, not only behind the 2 s one.
    expect(longRefusals).toBeGreaterThan(20)
    // Refusals where some identifier's slot had room, and so was charged then undone, or peeked at.
    expect(splitRefusals).toBeGreaterThan(5)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })
})

// One target with one window, the commonest decision and the one whose speed is measured most:
// these rules take it on every step, across window boundaries, costs over the limit, states that
// have expired, and both encodings of a counter's state.
describe('MemoryStore and RedisStore decide one-window rules identically', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it.each(ALGORITHMS)('%s, over 2,000 random operations', async (algorithm) => {
    const clock = new ManualClock(1_700_000_000_777)
    const rules = {
      small: { algorithm, windows: [{ limit: 7, period: '3s' }] },
      wide: { algorithm, windows: [{ limit: 60, period: '1m' }] },
      // Counts and deficits too large to pack: the state goes between its compact and text forms.
      huge: { algorithm, windows: [{ limit: 2_000_000_000, period: '1m' }] },
    } satisfies RulesOptions
    const limiters = memoryAndRedis(client, clock, rules, `one-window:${process.pid}:${algorithm}:`)
    const random = seededRandom(100 + ALGORITHMS.indexOf(algorithm))
    const seen = { allowed: 0, refused: 0 }
    for (let step = 0; step < 2_000; step++) {
      clock.advance(random(40) === 0 ? 70_000 : random(300))
      const rule = (['small', 'small', 'wide', 'huge'] as const)[random(4)] ?? 'small'
      const ids = [IDENTIFIERS[random(2)] as string]
      const cost =
        rule === 'huge' && random(3) === 0
          ? 400_000_000 + random(1_000) * 1_000_000
          : random(12) === 0
            ? 0
            : random(15) === 0
              ? 8 + random(60)
              : 1 + random(3)
      const operation = (['consume', 'consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(6)] ?? 'peek'
      const [local, redis] = (await Promise.all(
        limiters.map((limiter) => limiter[operation](rule, ids, { cost })),
      )) as [Decision, Decision]
      expect(redis, `step ${step}: ${operation} ${rule} ${ids[0]} cost ${cost}`).toEqual(local)
      if (operation === 'consume') seen[local.allowed ? 'allowed' : 'refused']++
    }
    expect(seen.allowed).toBeGreaterThan(200)
    expect(seen.refused).toBeGreaterThan(60)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })
})

// A sliding log held at its limit drops an entry for each it adds, and the MemoryStore cuts the
// dropped ones off its arrays in one go now and then rather than at every charge: this run keeps
// logs of hundreds of entries turning over, cut after cut, and Redis must agree at every step.
describe('MemoryStore and RedisStore decide a sliding log held at its limit identically', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it('over 6,000 operations', async () => {
    const clock = new ManualClock(1_700_000_000_555)
    const rules = {
      log: {
        algorithm: 'sliding-log',
        windows: [
          { limit: 80, period: '500ms' },
          { limit: 300, period: '2s' },
        ],
      },
    } satisfies RulesOptions
    const limiters = memoryAndRedis(client, clock, rules, `held-log:${process.pid}:`)
    const random = seededRandom(300)
    const seen = { allowed: 0, refused: 0 }
    for (let step = 0; step < 6_000; step++) {
      clock.advance(random(6))
      const ids = [IDENTIFIERS[random(4) === 0 ? 1 : 0] as string]
      const cost = random(25) === 0 ? 2 + random(20) : 1
      const operation = (['consume', 'consume', 'consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(7)]
      const [local, redis] = (await Promise.all(
        limiters.map((limiter) => limiter[operation ?? 'peek']('log', ids, { cost })),
      )) as [Decision, Decision]
      expect(redis, `step ${step}: ${operation} ${ids[0]} cost ${cost}`).toEqual(local)
      if (operation === 'consume') seen[local.allowed ? 'allowed' : 'refused']++
    }
    // Many times what the 2 s window holds was admitted, and requests were refused all along.
    expect(seen.allowed).toBeGreaterThan(5 * 300)
    expect(seen.refused).toBeGreaterThan(300)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })
})

// Large quotas (bytes): limits up to 2^53 − 1, periods up to 366 days, costs up to the limit,
// jumps of hours to months, and now and then a charge from a clock a day fast (another app server's),
// so that sums and products pass 2^53, the bucket takes its coarser scale, and state stamped
// ahead of the clock is moved back, on every path: one window, several windows and identifiers,
// parents.
describe('MemoryStore and RedisStore decide large quotas identically', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  const MAX = Number.MAX_SAFE_INTEGER
  const DAY = 86_400_000

  it.each(ALGORITHMS)('%s, over 1,500 random operations', async (algorithm) => {
    const clock = new ManualClock(1_700_000_000_321)
    const rules = {
      max: { algorithm, windows: [{ limit: MAX, period: '366d' }] },
      fast: { algorithm, windows: [{ limit: MAX - 2, period: '1m' }] },
      day: { algorithm, windows: [{ limit: 1e9, period: '1d' }] },
      bytes: {
        algorithm,
        windows: [
          { limit: 1e10, period: '1h' },
          { limit: 1e11, period: '30d' },
        ],
        parent: 'all',
      },
      all: { algorithm, windows: [{ limit: MAX - 6, period: '366d' }] },
    } satisfies RulesOptions
    const limits: Record<keyof typeof rules, number> = { max: MAX, fast: MAX - 2, day: 1e9, bytes: 1e10, all: MAX }
    const limiters: Limiter[] = [
      createLimiter({ store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), rules, onWarning: () => {} }),
      createLimiter({
        store: new RedisStore({
          client,
          clock: clock.now,
          prefix: `large:${process.pid}:${algorithm}:`,
          refusalCache: false,
        }),
        rules,
        onWarning: () => {},
        // A busy machine must not turn a slow answer into a difference.
        storeTimeoutMs: 10_000,
      }),
    ]
    const random = seededRandom(200 + ALGORITHMS.indexOf(algorithm))
    const seen = { allowed: 0, refused: 0 }
    for (let step = 0; step < 1_500; step++) {
      const roll = random(100)
      if (roll < 3) clock.advance(DAY)
      else if (roll < 5) clock.advance(30 * DAY + random(DAY))
      else if (roll < 15) clock.advance(random(3_600_000))
      else clock.advance(random(5))
      const rule = (['max', 'max', 'fast', 'day', 'bytes', 'bytes', 'all'] as const)[random(7)] ?? 'max'
      const ids = random(3) === 0 ? ['ip:203.0.113.7', 'user:42'] : [IDENTIFIERS[random(2)] as string]
      const limit = limits[rule]
      // Costs spread over the limit's whole range: a random fraction, with exact integer steps.
      const cost =
        random(10) === 0
          ? 0
          : random(8) === 0
            ? limit - random(3)
            : Math.floor((limit / 1_000_000) * random(1_000_000)) + random(1_000)
      const operation = (['consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(5)] ?? 'peek'
      // Now and then another app server, a day fast, charges fresh targets first. Only fresh
      // ones: Redis expires keys on its own clock, so one the manual clock has passed (gone from
      // the MemoryStore) may still be there to be read when the clock goes back.
      const skewed = random(30) === 0
      if (skewed) {
        await Promise.all(limiters.map((limiter) => limiter.reset(rule, ids)))
        clock.advance(DAY)
        await Promise.all(limiters.map((limiter) => limiter.consume(rule, ids, { cost: Math.floor(limit / 2) })))
        clock.advance(-DAY)
      }
      const [local, redis] = (await Promise.all(
        limiters.map((limiter) => limiter[operation](rule, ids, { cost })),
      )) as [Decision, Decision]
      expect(redis, `step ${step}: ${operation} ${rule} ${ids.join(',')} cost ${cost}`).toEqual(local)
      if (operation === 'consume') seen[local.allowed ? 'allowed' : 'refused']++
    }
    expect(seen.allowed).toBeGreaterThan(100)
    expect(seen.refused).toBeGreaterThan(100)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })
})

// Shedding draws one random number per decision in the process; Redis gets it in the decision's
// request and must drop exactly the requests the in-process model drops, the unit and the
// millisecond alike: windows with and without lowBurst, identifiers, parents, costs above
// lowBurst, and decisions split by slot, where a slot sheds while another limits or sheds.
describe('MemoryStore and RedisStore shed identically', () => {
  let client: Redis
  let splitting: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
    // As above: a standalone server whose client is flagged as a cluster splits by slot.
    splitting = new Redis(inject('redisUrl'))
    ;(splitting as { isCluster: boolean }).isCluster = true
  })
  afterAll(async () => {
    await client.quit()
    await splitting.quit()
  })

  it.each(ALGORITHMS)('%s, over 1,000 random operations', async (algorithm) => {
    const clock = new ManualClock(1_700_000_000_457)
    const rules = {
      child: {
        algorithm,
        windows: [
          { limit: 12, period: '2s', lowBurst: 3 },
          { limit: 30, period: '15s' },
        ],
        parent: 'root',
      },
      root: { algorithm, windows: [{ limit: 80, period: '30s', lowBurst: 40 }] },
      // A bucket past 2^53 units takes its coarser scale; lowBurst 0 sheds from the first unit.
      bytes: { algorithm, windows: [{ limit: 2_000_000_000_000, period: '1m', lowBurst: 0 }] },
    } satisfies RulesOptions
    const storeTimeoutMs = 30_000
    const seed = 300 + ALGORITHMS.indexOf(algorithm)
    // Each limiter draws from its own generator of the same seed: the same numbers, decision by decision.
    const limiters: Limiter[] = [
      createLimiter({
        store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
        rules,
        random: seededUniform(seed),
      }),
      createLimiter({
        store: new RedisStore({
          client,
          clock: clock.now,
          prefix: `shed:${process.pid}:${algorithm}:`,
          refusalCache: false,
        }),
        rules,
        storeTimeoutMs,
        random: seededUniform(seed),
      }),
      createLimiter({
        store: new RedisStore({
          client: splitting,
          clock: clock.now,
          prefix: `shed-split:${process.pid}:${algorithm}:`,
          refusalCache: false,
        }),
        rules,
        storeTimeoutMs,
        random: seededUniform(seed),
      }),
    ]
    const random = seededRandom(seed)
    const seen = { ok: 0, shed: 0, limited: 0, splitShed: 0 }
    for (let step = 0; step < 1_000; step++) {
      clock.advance(random(60) === 0 ? 20_000 : random(150))
      const rule = (['child', 'child', 'child', 'root', 'bytes'] as const)[random(5)] ?? 'child'
      const ids = IDENTIFIERS.filter((_, k) => random(10) < (k === 1 ? 9 : 4))
      if (ids.length === 0) ids.push(IDENTIFIERS[random(3)] as string)
      const cost =
        rule === 'bytes'
          ? Math.floor(random(1_000_000) * 400_000) + random(1_000)
          : random(10) === 0
            ? 0
            : 1 + random(random(4) === 0 ? 14 : 3)
      const operation = (['consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(5)] ?? 'peek'
      const [local, redis, split] = (await Promise.all(
        limiters.map((limiter) => limiter[operation](rule, ids, { cost })),
      )) as [Decision, Decision, Decision]
      const what = `step ${step}: ${operation} ${rule} ${ids.join(',')} cost ${cost}`
      expect(redis, what).toEqual(local)
      expect(split, `${what}, split by slot`).toEqual(local)
      if (local.reason === 'ok' || local.reason === 'shed' || local.reason === 'limited') seen[local.reason]++
      if (local.reason === 'shed' && ids.length > 1) seen.splitShed++
    }
    expect(seen.ok).toBeGreaterThan(200)
    expect(seen.shed).toBeGreaterThan(100)
    expect(seen.limited).toBeGreaterThan(20)
    expect(seen.splitShed).toBeGreaterThan(30)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })

  // On a split decision each slot sheds or limits on its own: a limit anywhere wins, and a slot
  // that shed then reports windows with room, as one script over every key would.
  it.each([
    ['ip:203.0.113.7', 'user:42'],
    ['user:42', 'ip:203.0.113.7'],
  ])('limits a decision split by slot where %s would shed and %s is over its limit', async (shedding, full) => {
    const clock = new ManualClock(1_700_000_000_000)
    const rules = { r: { windows: [{ limit: 10, period: '10s', lowBurst: 4 }] } } satisfies RulesOptions
    const plain = { r: { windows: [{ limit: 10, period: '10s' }] } } satisfies RulesOptions
    const stores = [
      new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
      new RedisStore({
        client: splitting,
        clock: clock.now,
        prefix: `shed-limit:${process.pid}:${shedding}:`,
        refusalCache: false,
      }),
    ]
    for (const store of stores) {
      const fill = createLimiter({ store, rules: plain })
      await fill.consume('r', shedding, { cost: 6 })
      await fill.consume('r', full, { cost: 10 })
    }
    const decisions = await Promise.all(
      stores.map((store) => createLimiter({ store, rules, random: () => 0 }).consume('r', IDENTIFIERS.slice(0, 2))),
    )
    expect(decisions[1]).toEqual(decisions[0])
    expect(decisions[0]).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: 10_000 })
    expect(decisions[0]?.windows.map((w) => [w.identifier, w.failed])).toEqual(
      IDENTIFIERS.slice(0, 2).map((id) => [id, id === full]),
    )
    for (const store of stores) await store.close()
  })
})
