import {
  createLimiter,
  type Limiter,
  MemoryStore,
  type MemoryStoreOptions,
  type RulesOptions,
  TollgateConfigError,
} from '@tollgate/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { SWEEP_SLICE } from '../../packages/core/src/stores/memory/memory-store.js'
import { textDigest } from '../../packages/core/src/support/digest.js'
import { collectedHeapUsed } from '../../packages/core/test/heap-fixtures.js'
import { ManualClock } from '../src/manual-clock.js'
import { runStoreConformance } from '../src/store-conformance.js'

interface RuleStates {
  readonly rule: string
  readonly algorithm: string
  readonly other: RuleStates | undefined
  readonly entries: Map<string, { state: unknown; expiresAt: number; stored: boolean }>
  readonly digests: Map<string, { state: unknown; expiresAt: number; stored: boolean }>
}

runStoreConformance('MemoryStore', async () => {
  let current: MemoryStore | undefined
  return {
    makeStore(clock) {
      current = new MemoryStore({ clock, sweepIntervalMs: 0 })
      return current
    },
    keys: async () => current?.ttls() ?? [],
    // The store keeps its state to itself (states by rule, each with its entries by identifier and
    // by digest); the suite compares it whole, before and after.
    snapshot: async () => {
      const byRule = (current as unknown as { statesByRule: Map<string, RuleStates> } | undefined)?.statesByRule
      const snapshot: Record<string, string> = {}
      for (const first of byRule?.values() ?? []) {
        for (let states: RuleStates | undefined = first; states !== undefined; states = states.other) {
          for (const [map, tag] of [
            [states.entries, ''],
            [states.digests, '#'],
          ] as const) {
            for (const [key, entry] of map) {
              if (entry.stored)
                snapshot[`${states.rule}:${states.algorithm}:${tag}${key}`] = JSON.stringify([
                  entry.state,
                  entry.expiresAt,
                ])
            }
          }
        }
      }
      return snapshot
    },
    close: async () => {},
  }
})

const START = 1_700_000_000_000

function limiterOver(store: MemoryStore, rules: RulesOptions = { api: { windows: [{ limit: 5, period: '60s' }] } }) {
  return createLimiter({ store, rules })
}

/** The name the rule's state is kept under, in keys: `name@<digest of its shape>`. */
function stateOf(limiter: Limiter, rule = 'api'): string {
  return limiter.rules.get(rule)?.stateName as string
}

async function remaining(limiter: Limiter, identifier: string): Promise<number> {
  return (await limiter.peek('api', identifier)).windows[0]!.remaining
}

describe('maxKeys', () => {
  it('holds at most maxKeys states, evicting the least recently charged', async () => {
    const time = new ManualClock(START)
    const store = new MemoryStore({ maxKeys: 100, clock: time.now, sweepIntervalMs: 0 })
    const limiter = limiterOver(store)
    for (let i = 0; i < 1_000; i++) {
      expect((await limiter.consume('api', `user-${i}`)).allowed).toBe(true)
      time.advance(1)
    }
    expect(store.size).toBeLessThanOrEqual(100)
    expect(store.size).toBe(100)
    expect(store.evictions).toBe(900)
    expect(await remaining(limiter, 'user-999')).toBe(4)
    expect(await remaining(limiter, 'user-900')).toBe(4)
    // Documented: an evicted identifier gets a fresh quota.
    expect(await remaining(limiter, 'user-0')).toBe(5)
    expect(await remaining(limiter, 'user-899')).toBe(5)
    await limiter.close()
  })

  // A login's lockout under an identifier flood: each identifier is refused once and blocked, so
  // the table of blocks stays full, each new block taking the place of the one written longest ago.
  it('holds at most maxKeys blocks under a flood of blocked identifiers, the newest still blocked', async () => {
    const store = new MemoryStore({ maxKeys: 100, clock: () => START, sweepIntervalMs: 0 })
    const limiter = createLimiter({
      store,
      rules: {
        login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1h' }], block: { after: 1, for: '1h' } },
      },
    })
    for (let i = 0; i < 1_000; i++) {
      await limiter.consume('login', `user:${i}`)
      expect((await limiter.consume('login', `user:${i}`)).reason).toBe('blocked')
    }
    const blocks = store.ttls().filter(({ key }) => key.endsWith(':block'))
    expect(blocks).toHaveLength(100)
    expect(blocks.map(({ key }) => key.split('{')[1]?.split('}')[0]).sort()).toEqual(
      Array.from({ length: 100 }, (_, i) => `user:${900 + i}`).sort(),
    )
    expect((await limiter.peek('login', 'user:999')).reason).toBe('blocked')
    await limiter.close()
  })

  it.each([
    ['charging it', (limiter: Limiter) => limiter.consume('api', 'a')],
    ['peeking at it', (limiter: Limiter) => limiter.peek('api', 'a')],
    ['refunding it', (limiter: Limiter) => limiter.refund('api', 'a')],
  ])('counts recency by use: %s saves a state from eviction', async (_, use) => {
    const store = new MemoryStore({ maxKeys: 3, clock: () => START, sweepIntervalMs: 0 })
    const limiter = limiterOver(store)
    for (const id of ['a', 'b', 'c']) await limiter.consume('api', id, { cost: 2 })
    await use(limiter)
    await limiter.consume('api', 'd')
    expect(store.evictions).toBe(1)
    expect(await remaining(limiter, 'b')).toBe(5)
    expect(await remaining(limiter, 'a')).toBeLessThan(5)
    await limiter.close()
  })

  it('evicts the oldest state when none was used since it was made', async () => {
    const store = new MemoryStore({ maxKeys: 3, clock: () => START, sweepIntervalMs: 0 })
    const limiter = limiterOver(store)
    for (const id of ['a', 'b', 'c', 'd']) await limiter.consume('api', id, { cost: 2 })
    expect(await remaining(limiter, 'a')).toBe(5)
    await limiter.close()
  })

  // Regression: a refused decision did not mark its state as used, so an identifier kept
  // refused was evicted first, and flooding the store with about 2.5 × maxKeys other
  // identifiers handed it a fresh quota.
  it.each([
    ['retries', (limiter: Limiter) => limiter.consume('api', 'attacker')],
    ['peeks', (limiter: Limiter) => limiter.peek('api', 'attacker')],
  ])(
    'keeps refusing an exhausted identifier that floods the store while it %s (refusals did not count as use)',
    async (_, retry) => {
      const store = new MemoryStore({ maxKeys: 100, clock: () => START, sweepIntervalMs: 0 })
      const limiter = limiterOver(store)
      await limiter.consume('api', 'attacker', { cost: 5 })
      for (let i = 0; i < 1_000; i++) {
        await limiter.consume('api', `flood:${i}`)
        if (i % 10 === 9) expect((await retry(limiter)).allowed).toBe(false)
      }
      expect(store.evictions).toBeGreaterThan(800)
      expect(await remaining(limiter, 'attacker')).toBe(0)
      await limiter.close()
    },
  )

  it('holds one state per (rule, identifier), whatever the number of windows', async () => {
    const store = new MemoryStore({ clock: () => START, sweepIntervalMs: 0 })
    const limiter = createLimiter({
      store,
      rules: {
        api: {
          windows: [
            { limit: 20, period: '60s' },
            { limit: 5, period: '3s' },
          ],
        },
        child: { windows: [{ limit: 3, period: '1s' }], parent: 'api' },
      },
    })
    await limiter.consume('child', ['a', 'b'])
    expect(store.size).toBe(4)
    await limiter.close()
  })

  // A decision finds its states first and writes them after: writing a new one may evict
  // another the same decision found, whose write must then add it back rather than update an
  // entry the store no longer holds.
  it('keeps the charge of a state that another write of the same decision evicted', async () => {
    const store = new MemoryStore({ maxKeys: 2, clock: () => START, sweepIntervalMs: 0 })
    const limiter = limiterOver(store)
    await limiter.consume('api', 'x')
    await limiter.consume('api', 'b')
    // Every state used since the hand last passed: its turn clears them all and evicts 'x'.
    await limiter.peek('api', 'b')
    await limiter.consume('api', ['y', 'x'])
    expect(store.evictions).toBe(2)
    expect(await remaining(limiter, 'x')).toBe(3)
    expect(await remaining(limiter, 'y')).toBe(4)
    expect(store.size).toBe(2)
    await limiter.close()
  })

  it('keeps apart the states of rules of one name and two algorithms, from limiters sharing the store', async () => {
    const store = new MemoryStore({ clock: () => START, sweepIntervalMs: 0 })
    const counter = createLimiter({
      store,
      rules: { api: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '60s' }] } },
    })
    const log = createLimiter({ store, rules: { api: { windows: [{ limit: 5, period: '60s' }] } } })
    await counter.consume('api', 'a', { cost: 2 })
    await log.consume('api', 'a')
    expect((await counter.peek('api', 'a')).windows[0]?.remaining).toBe(3)
    expect((await log.peek('api', 'a')).windows[0]?.remaining).toBe(4)
    expect(store.ttls().map(({ key }) => key)).toEqual([
      `${counter.rules.get('api')?.stateName}:{a}:fw`,
      `${log.rules.get('api')?.stateName}:{a}:sl`,
    ])
    await log.reset('api', 'a')
    expect((await counter.peek('api', 'a')).windows[0]?.remaining).toBe(3)
    expect(store.size).toBe(1)
    await counter.close()
  })
})

describe('expiry', () => {
  it('sweep() drops state once it has expired, not before', async () => {
    const time = new ManualClock(START)
    const store = new MemoryStore({ clock: time.now, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    await limiter.consume('api', 'a')
    expect(store.ttls()).toEqual([{ key: `${stateOf(limiter)}:{a}:sl`, ttlMs: 1_000 }])
    time.advance(999)
    store.sweep()
    expect(store.size).toBe(1)
    time.advance(1)
    store.sweep()
    expect(store.size).toBe(0)
    await limiter.close()
  })

  it('sweep() keeps what has not expired', async () => {
    const time = new ManualClock(START)
    const store = new MemoryStore({ clock: time.now, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    await limiter.consume('api', 'old')
    time.advance(500)
    await limiter.consume('api', 'new')
    time.advance(500)
    store.sweep()
    expect(store.ttls()).toEqual([{ key: `${stateOf(limiter)}:{new}:sl`, ttlMs: 500 }])
    await limiter.close()
  })

  it('does not report expired state even when nothing swept it', async () => {
    const time = new ManualClock(START)
    const store = new MemoryStore({ clock: time.now, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 2, period: '1s' }] } })
    await limiter.consume('api', 'a')
    await limiter.consume('api', 'a')
    expect((await limiter.consume('api', 'a')).allowed).toBe(false)
    time.advance(999)
    expect((await limiter.peek('api', 'a')).allowed).toBe(false)
    time.advance(1)
    expect(store.size).toBe(1)
    const decision = await limiter.peek('api', 'a')
    expect(decision.allowed).toBe(true)
    expect(decision.windows[0]).toMatchObject({ remaining: 2, resetAtMs: START + 1_000 })
    await limiter.close()
  })

  it('ttls() names each key as RedisStore does, an identifier it cannot write raw as its digest', async () => {
    const store = new MemoryStore({ clock: () => START, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { 'api v2': { windows: [{ limit: 5, period: '1s' }] } })
    await limiter.consume('api v2', ['user:ann', 'name with spaces'])
    expect(store.ttls().map(({ key }) => key)).toEqual([
      `#${textDigest(stateOf(limiter, 'api v2'))}:{user:ann}:sl`,
      `#${textDigest(stateOf(limiter, 'api v2'))}:{#${textDigest('name with spaces')}}:sl`,
    ])
    await limiter.close()
  })

  // Long identifiers are held by their digest, as in Redis keys; a short identifier that spells
  // that digest is another identifier.
  it('holds a long identifier by its digest, apart from a short identifier spelling that digest', async () => {
    const store = new MemoryStore({ clock: () => START, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    const long = `user:${'x'.repeat(10_000)}`
    const digest = `#${textDigest(long)}`
    await limiter.consume('api', long, { cost: 2 })
    await limiter.consume('api', digest)
    expect(store.ttls().map(({ key }) => key)).toEqual([
      `${stateOf(limiter)}:{#${textDigest(digest)}}:sl`,
      `${stateOf(limiter)}:{${digest}}:sl`,
    ])
    expect(await remaining(limiter, long)).toBe(3)
    expect(await remaining(limiter, digest)).toBe(4)
    await limiter.reset('api', long)
    expect(await remaining(limiter, long)).toBe(5)
    expect(store.size).toBe(1)
    await limiter.close()
  })

  // An expired state stays held until a decision writes it again or a sweep drops it; Redis no
  // longer has the key by then.
  it('ttls() leaves out a state that expired while nothing swept it', async () => {
    const time = new ManualClock(START)
    const store = new MemoryStore({ clock: time.now, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    await limiter.consume('api', 'a')
    await limiter.consume('api', 'b')
    time.advance(1_000)
    await limiter.peek('api', 'a')
    expect(store.ttls()).toEqual([])
    await limiter.consume('api', 'a')
    expect(store.ttls()).toEqual([{ key: `${stateOf(limiter)}:{a}:sl`, ttlMs: 1_000 }])
    expect(store.size).toBe(2)
    store.sweep()
    expect(store.size).toBe(1)
    await limiter.close()
  })
})

describe('options', () => {
  it.each([
    ['maxKeys 0', { maxKeys: 0 }, 'option maxKeys must be a positive integer, got 0'],
    ['maxKeys 1.5', { maxKeys: 1.5 }, 'option maxKeys must be a positive integer, got 1.5'],
    ['maxKeys -1', { maxKeys: -1 }, 'option maxKeys must be a positive integer, got -1'],
    ["maxKeys '10'", { maxKeys: '10' }, 'option maxKeys must be a positive integer, got "10"'],
    ['maxKeys NaN', { maxKeys: Number.NaN }, 'option maxKeys must be a positive integer, got NaN'],
    [
      'sweepIntervalMs -1',
      { sweepIntervalMs: -1 },
      'option sweepIntervalMs must be an integer from 0 to 2147483647, got -1',
    ],
    [
      'sweepIntervalMs 1.5',
      { sweepIntervalMs: 1.5 },
      'option sweepIntervalMs must be an integer from 0 to 2147483647, got 1.5',
    ],
    ["clock 'x'", { clock: 'x' }, 'option clock must be a function, got "x"'],
    [
      'a clock returning a string',
      { clock: () => '1700000000000' },
      'MemoryStore option clock returned "1700000000000"; a clock must return whole milliseconds since the epoch, from 0 to 8640000000000000 (called once at construction)',
    ],
    [
      'a clock returning seconds as a fraction',
      { clock: () => 1_700_000_000.5 },
      'MemoryStore option clock returned 1700000000.5',
    ],
    [
      'a clock that throws',
      {
        clock: () => {
          throw new Error('no time')
        },
      },
      'MemoryStore option clock threw "no time" when called at construction',
    ],
    ['an unknown key', { maxkeys: 10 }, "MemoryStore options: unknown option 'maxkeys'"],
  ])('%s is refused with a TollgateConfigError naming the value', (_, options, message) => {
    let thrown: unknown
    try {
      new MemoryStore(options as MemoryStoreOptions).close()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TollgateConfigError)
    expect(thrown).toHaveProperty('code', 'TG_CONFIG')
    expect((thrown as Error).message).toContain(message)
  })

  it.each([null, 5, [{ maxKeys: 1 }]])('options %j are refused', (options) => {
    expect(() => new MemoryStore(options as MemoryStoreOptions)).toThrow(TollgateConfigError)
  })

  it('accepts no options at all', async () => {
    await new MemoryStore().close()
  })

  // Regression: setInterval turns a delay above 2^31 − 1 ms into 1 ms, so a store meant to sweep
  // rarely swept every millisecond.
  it('refuses a sweepIntervalMs that setInterval cannot hold', async () => {
    let store: MemoryStore | undefined
    try {
      expect(() => {
        store = new MemoryStore({ sweepIntervalMs: 2 ** 31 })
      }).toThrow(TollgateConfigError)
    } finally {
      await store?.close()
    }
  })
})

describe('close()', () => {
  it('clears the sweep timer and the state', async () => {
    const store = new MemoryStore({ sweepIntervalMs: 10 })
    const limiter = limiterOver(store)
    await limiter.consume('api', 'a')
    expect(store.size).toBe(1)
    await expect(limiter.close()).resolves.toBeUndefined()
    expect(store.size).toBe(0)
  })

  it('can be called on a store without a timer', async () => {
    await expect(new MemoryStore({ sweepIntervalMs: 0 }).close()).resolves.toBeUndefined()
  })
})

describe('memory after eviction', () => {
  // Regression: the eviction cursor, a live Map iterator parked between evictions, kept every
  // hash table the Map rehashed away since, and with them every state they had held.
  it('keeps the heap flat under churn after a flood made it evict (the eviction cursor held rehashed tables)', async () => {
    const time = new ManualClock(START)
    const store = new MemoryStore({ maxKeys: 20_000, clock: time.now, sweepIntervalMs: 0 })
    const windows = [{ limit: 5, periodMs: 60_000 }]
    let next = 0
    const consumeNew = () =>
      store.evaluateSync({
        operation: 'consume',
        cost: 1,
        targets: [{ rule: 'api', algorithm: 'fixed-window', windows, identifier: `user:${next++}` }],
      })
    for (let i = 0; i <= 20_000; i++) consumeNew()
    expect(store.evictions).toBe(1)
    const minute = () => {
      for (let i = 0; i < 10_000; i++) consumeNew()
      time.advance(61_000)
      store.sweep()
      expect(store.size).toBe(0)
    }
    minute()
    minute()
    const before = await collectedHeapUsed()
    for (let m = 0; m < 30; m++) minute()
    // Each minute's states come to about 4 MB: one minute's leak would show.
    expect((await collectedHeapUsed()) - before).toBeLessThan(3 * 2 ** 20)
    await store.close()
  })
})

describe('memory per state', () => {
  // Regression: a state keyed by an identifier of thousands of characters held all of it, where
  // Redis keys hold its digest.
  it('holds no more for a long identifier than for a short one (long identifiers were kept whole)', async () => {
    const store = new MemoryStore({ clock: () => START, sweepIntervalMs: 0 })
    const windows = [{ limit: 5, periodMs: 60_000 }]
    const consume = (identifier: string) =>
      store.evaluateSync({
        operation: 'consume',
        cost: 1,
        targets: [{ rule: 'api', algorithm: 'fixed-window', windows, identifier }],
      })
    const before = await collectedHeapUsed()
    for (let i = 0; i < 1_000; i++) {
      // A flat string of its own per request, as a server reading it from a header makes one.
      const identifier = Buffer.alloc(16_000, 'x')
      identifier.write(`user:${i}:`)
      consume(identifier.toString('latin1'))
    }
    expect(store.size).toBe(1_000)
    // Kept whole, the identifiers alone come to 16 MB.
    expect((await collectedHeapUsed()) - before).toBeLessThan(2 * 2 ** 20)
    await store.close()
  })
})

describe('the timer sweep', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  // Regression: the timer swept every expired state in one go; a million of them held the
  // event loop for about half a second.
  it('sweeps in slices of at most SWEEP_SLICE states, letting the event loop run between them (one sweep blocked it)', async () => {
    vi.useFakeTimers()
    const time = new ManualClock(START)
    const store = new MemoryStore({ clock: time.now, sweepIntervalMs: 60_000 })
    const limiter = limiterOver(store, {
      short: { windows: [{ limit: 5, period: '1s' }] },
      long: { windows: [{ limit: 5, period: '1h' }] },
    })
    const held = 2 * SWEEP_SLICE + SWEEP_SLICE / 2
    // Every other state expires: a slice that looks at n states drops n / 2.
    for (let i = 0; i < held; i++) await limiter.consume(i % 2 === 0 ? 'short' : 'long', `user:${i}`)
    time.advance(1_000)
    const sizes: number[] = []
    vi.advanceTimersToNextTimer()
    sizes.push(store.size)
    // Decisions go on between slices.
    expect((await limiter.consume('long', 'user:1')).windows[0]?.remaining).toBe(3)
    while (vi.getTimerCount() > 1) {
      vi.advanceTimersToNextTimer()
      sizes.push(store.size)
    }
    expect(sizes).toEqual([held - SWEEP_SLICE / 2, held - SWEEP_SLICE, held / 2])
    await limiter.close()
  })

  it('stops a sweep under way on close(), and sweep() finishes one at once', async () => {
    vi.useFakeTimers()
    const time = new ManualClock(START)
    const store = new MemoryStore({ clock: time.now, sweepIntervalMs: 60_000 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    for (let i = 0; i < 3 * SWEEP_SLICE; i++) await limiter.consume('api', `user:${i}`)
    time.advance(1_000)
    vi.advanceTimersToNextTimer()
    expect(store.size).toBe(2 * SWEEP_SLICE)
    store.sweep()
    expect(store.size).toBe(0)
    expect(vi.getTimerCount()).toBe(1)
    for (let i = 0; i < 3 * SWEEP_SLICE; i++) await limiter.consume('api', `user:${i}`)
    time.advance(1_000)
    vi.advanceTimersToNextTimer()
    expect(vi.getTimerCount()).toBe(2)
    await limiter.close()
    expect(vi.getTimerCount()).toBe(0)
  })
})
