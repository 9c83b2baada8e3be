import {
  type AlgorithmName,
  createLimiter,
  HybridStore,
  type Limiter,
  MemoryStore,
  type RulesOptions,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'
import { seededRandom } from '../src/seeded-random.js'

// The bound a HybridStore states: with N processes syncing every T, a load of R units per ms spread
// evenly over them and a limit L per window, steady overload admits about R·T·(N−1)/N above L per
// window, never more than R·(2T + RTT)·(N−1)/N. Here time only moves when the test moves it, so
// RTT is 0, and every store syncs at its own phase of the interval, as timers spread them.
const N = 10
const T = 1_000
const STEP = 10
const L = 1_000
const PERIOD = 60_000
const WINDOWS = 10
const MAX_COST = 3
// 6 × the limit's rate: per step, each store receives a request with this chance, of cost 1–3 (mean 2).
const OFFERED = 6
const CHANCE = (OFFERED * L * STEP) / PERIOD / N / 2
const R = (OFFERED * L) / PERIOD
const EXCESS = (R * T * (N - 1)) / N
const T0 = 1_763_700_000_000 - (1_763_700_000_000 % PERIOD)

interface Run {
  admitted: number[]
  overAdmitted: number
  reference: number[]
  /** Each store's `stats().syncPeriodMs` at the end. */
  periods: number[]
}

describe('HybridStore over-admission bound', () => {
  let client: Redis
  let prefixes = 0
  beforeAll(() => {
    client = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 })
  })
  afterAll(async () => {
    await client.quit()
  })

  /** `processes` stores under one seeded load; per 60 s window the units each admitted, and an exact store's. */
  async function run(
    algorithm: AlgorithmName,
    processes: number,
    extrapolate: boolean,
    seed: number,
    // How often each store syncs, where syncIntervalMs says T: syncs slower than the interval.
    every = T,
  ): Promise<Run> {
    const clock = new ManualClock(T0)
    const rules = { r: { algorithm, windows: [{ limit: L, period: PERIOD }] } } satisfies RulesOptions
    const prefix = `bound${prefixes++}:`
    const stores = Array.from(
      { length: processes },
      () => new HybridStore({ client, prefix, clock: clock.now, autoSync: false, syncIntervalMs: T, extrapolate }),
    )
    const limiters: Limiter[] = stores.map((store) => createLimiter({ store, rules, onWarning: () => {} }))
    // The same requests on one exact store: what one process deciding alone admits.
    const reference = createLimiter({ store: new MemoryStore({ clock: clock.now }), rules, onWarning: () => {} })
    const random = seededRandom(seed)
    const admitted = new Array<number>(WINDOWS).fill(0)
    const exact = new Array<number>(WINDOWS).fill(0)
    let overAdmitted = 0
    const perStore = (CHANCE * N) / processes
    for (let t = 0; t < WINDOWS * PERIOD; t += STEP) {
      const window = Math.floor(t / PERIOD)
      for (let i = 0; i < processes; i++) {
        if (t % every === Math.floor((i * every) / processes / STEP) * STEP) {
          const report = await (stores[i] as HybridStore).syncNow()
          expect(report.error).toBeUndefined()
          overAdmitted += report.overAdmitted
        }
        if (random(1_000_000) < perStore * 1_000_000) {
          const cost = 1 + random(MAX_COST)
          if ((await (limiters[i] as Limiter).consume('r', 'ip:1', { cost })).allowed)
            admitted[window] = (admitted[window] ?? 0) + cost
          if ((await reference.consume('r', 'ip:1', { cost })).allowed) exact[window] = (exact[window] ?? 0) + cost
        }
      }
      clock.advance(STEP)
    }
    const periods = stores.map((store) => store.stats().syncPeriodMs)
    for (const store of stores) overAdmitted += (await store.syncNow()).overAdmitted
    await Promise.all([...limiters, reference].map((limiter) => limiter.close()))
    return { admitted, overAdmitted, reference: exact, periods }
  }

  it.each([true, false])(
    'fixed window, 10 processes (extrapolate %s): at least L per window, within the stated bound, and the reported excess adds up',
    async (extrapolate) => {
      const { admitted, overAdmitted } = await run('fixed-window', N, extrapolate, 7)
      const excess = admitted.map((units) => units - L)
      for (const [w, units] of excess.entries()) {
        expect(units, `window ${w}: ${admitted[w]} admitted`).toBeGreaterThanOrEqual(0)
        expect(units, `window ${w}: ${admitted[w]} admitted`).toBeLessThanOrEqual(2 * EXCESS + MAX_COST)
      }
      const mean = excess.reduce((sum, units) => sum + units, 0) / WINDOWS
      expect(mean).toBeLessThanOrEqual(1.25 * EXCESS)
      expect(overAdmitted).toBe(excess.reduce((sum, units) => sum + units, 0))
    },
    120_000,
  )

  // Syncs that take longer than the interval lengthen the real period, and the excess grows with
  // it: the bound holds with the period each store measures, not with syncIntervalMs.
  it('fixed window, 10 processes syncing every 3 s against an interval of 1 s: within the bound of the period they report', async () => {
    const every = 3 * T
    const { admitted, periods } = await run('fixed-window', N, true, 7, every)
    expect(new Set(periods)).toEqual(new Set([every]))
    const slowExcess = (R * every * (N - 1)) / N
    const excess = admitted.map((units) => units - L)
    for (const [w, units] of excess.entries()) {
      expect(units, `window ${w}: ${admitted[w]} admitted`).toBeGreaterThanOrEqual(0)
      expect(units, `window ${w}: ${admitted[w]} admitted`).toBeLessThanOrEqual(2 * slowExcess + MAX_COST)
    }
    const mean = excess.reduce((sum, units) => sum + units, 0) / WINDOWS
    expect(mean).toBeLessThanOrEqual(1.25 * slowExcess)
    // The bound stated with syncIntervalMs would not hold.
    expect(mean).toBeGreaterThan(1.25 * EXCESS)
  }, 120_000)

  it.each(['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const)(
    '%s, one process: exactly what one exact store admits',
    async (algorithm) => {
      const { admitted, reference } = await run(algorithm, 1, true, 11)
      expect(admitted).toEqual(reference)
    },
    120_000,
  )

  it.each(['sliding-window', 'token-bucket', 'gcra'] as const)(
    '%s, 10 processes: within the stated bound of what one exact store admits',
    async (algorithm) => {
      const { admitted, reference } = await run(algorithm, N, true, 13)
      const excess = admitted.map((units, w) => units - (reference[w] as number))
      for (const [w, units] of excess.entries()) {
        expect(units, `window ${w}: ${admitted[w]} admitted, ${reference[w]} exactly`).toBeLessThanOrEqual(
          2 * EXCESS + MAX_COST,
        )
        // Syncing late can also refuse a little early, never by more than the same bound.
        expect(units, `window ${w}: ${admitted[w]} admitted, ${reference[w]} exactly`).toBeGreaterThanOrEqual(
          -(2 * EXCESS + MAX_COST),
        )
      }
    },
    120_000,
  )
})
