import { describe, expect, it } from 'vitest'
import {
  createLimiter,
  type Limiter,
  MemoryStore,
  type MemoryStoreOptions,
  type RulesOptions,
  TollgateConfigError,
} from '../src/index.js'

const START = 1_700_000_000_000

function manualClock() {
  let now = START
  return {
    clock: () => now,
    advance(ms: number) {
      now += ms
    },
  }
}

function limiterOver(store: MemoryStore, rules: RulesOptions = { api: { windows: [{ limit: 5, period: '60s' }] } }) {
  return createLimiter({ store, rules })
}

async function remaining(limiter: Limiter, identifier: string): Promise<number> {
  return (await limiter.peek('api', identifier)).windows[0]!.remaining
}

describe('maxKeys', () => {
  it('holds at most maxKeys states, evicting the least recently charged', async () => {
    const time = manualClock()
    const store = new MemoryStore({ maxKeys: 100, clock: time.clock, sweepIntervalMs: 0 })
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

  it('counts recency by charge: charging a state again saves it from eviction, peeking does not', async () => {
    const store = new MemoryStore({ maxKeys: 2, clock: manualClock().clock, sweepIntervalMs: 0 })
    const limiter = limiterOver(store)
    await limiter.consume('api', 'a')
    await limiter.consume('api', 'b')
    await limiter.consume('api', 'a')
    await limiter.peek('api', 'b')
    await limiter.consume('api', 'c')
    expect(store.evictions).toBe(1)
    expect(await remaining(limiter, 'a')).toBe(3)
    expect(await remaining(limiter, 'b')).toBe(5)
    expect(await remaining(limiter, 'c')).toBe(4)
    await limiter.close()
  })

  it('holds one state per (rule, identifier), whatever the number of windows', async () => {
    const store = new MemoryStore({ clock: manualClock().clock, sweepIntervalMs: 0 })
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
})

describe('expiry', () => {
  it('sweep() drops state once it has expired, not before', async () => {
    const time = manualClock()
    const store = new MemoryStore({ clock: time.clock, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    await limiter.consume('api', 'a')
    expect(store.ttls()).toEqual([{ key: 'api:{a}:sl', ttlMs: 1_000 }])
    time.advance(999)
    store.sweep()
    expect(store.size).toBe(1)
    time.advance(1)
    store.sweep()
    expect(store.size).toBe(0)
    await limiter.close()
  })

  it('sweep() keeps what has not expired', async () => {
    const time = manualClock()
    const store = new MemoryStore({ clock: time.clock, sweepIntervalMs: 0 })
    const limiter = limiterOver(store, { api: { windows: [{ limit: 5, period: '1s' }] } })
    await limiter.consume('api', 'old')
    time.advance(500)
    await limiter.consume('api', 'new')
    time.advance(500)
    store.sweep()
    expect(store.ttls()).toEqual([{ key: 'api:{new}:sl', ttlMs: 500 }])
    await limiter.close()
  })

  it('does not report expired state even when nothing swept it', async () => {
    const time = manualClock()
    const store = new MemoryStore({ clock: time.clock, sweepIntervalMs: 0 })
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

  it('reset() forgets the state', async () => {
    const store = new MemoryStore({ clock: manualClock().clock, sweepIntervalMs: 0 })
    const limiter = limiterOver(store)
    await limiter.consume('api', 'a')
    await limiter.reset('api', 'a')
    expect(store.size).toBe(0)
    expect(await remaining(limiter, 'a')).toBe(5)
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
    ['an unknown key', { maxkeys: 10 }, "MemoryStore: unknown option 'maxkeys'"],
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
