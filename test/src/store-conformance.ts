import {
  ALGORITHMS,
  type AlgorithmName,
  createLimiter,
  type Limiter,
  type RulesOptions,
  type Store,
} from '@tollgate/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeIdentifierRules } from './identifier-rules-conformance.js'
import { describeLockouts } from './lockout-conformance.js'
import { ManualClock } from './manual-clock.js'
import { describeReservations } from './reservation-conformance.js'
import { seededRandom } from './seeded-random.js'
import { describeShedding } from './shedding-conformance.js'
import { withAlgorithm } from './with-algorithm.js'

/** How long a decision of the suite waits for its store. */
const ANSWER_WITHIN_MS = 10_000

export interface StoreHarness {
  /** A store over state no other test touches, reading time from `clock`. */
  makeStore(clock: () => number): Store
  /** Every key the store made holds, with its remaining TTL in ms (-1: none). */
  keys(): Promise<Array<{ key: string; ttlMs: number }>>
  /** Every key the store made holds with its state, as text that differs whenever the state does. */
  snapshot(): Promise<Record<string, string>>
  close(): Promise<void>
}

/** The key of a refund's, undo's or reset's operation (`<prefix>!op:{…}:…`), not of any state. */
export function isOperationKey(key: string): boolean {
  return key.includes('!op:{')
}

/** A reset's mark beside the key it forgot (`<key>:reset`), not of any state (lua/reset.lua). */
export function isResetMark(key: string): boolean {
  return key.endsWith(':reset')
}

/** Keys a Redis store writes that hold no state: operations' keys and resets' marks. */
export function holdsNoState(key: string): boolean {
  return isOperationKey(key) || isResetMark(key)
}

/** A time aligned to every period used below, so fixed windows start at the clock's start. */
const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000)

/** When the 6th request of a 5-per-10 s burst fits, by algorithm. */
const RETRY_AFTER_BURST: Readonly<Record<AlgorithmName, number>> = {
  'sliding-log': 10_000,
  'fixed-window': 10_000,
  // The burst becomes the previous window at 10 s, weighing 5 × (10 − 2) / 10 = 4 at 12 s.
  'sliding-window': 12_000,
  // 5 tokens per 10 s: one every 2 s.
  'token-bucket': 2_000,
  gcra: 2_000,
}

export interface ConformanceOptions {
  /**
   * The algorithms the store decides (HybridStore: no sliding log). Rules that name no algorithm
   * then take the first of them instead of the sliding log, and tests of the sliding log alone
   * are skipped.
   * @default ALGORITHMS
   */
  algorithms?: readonly AlgorithmName[]
}

/** The conformance suite every store runs unchanged. */
export function runStoreConformance(
  name: string,
  setup: () => Promise<StoreHarness>,
  { algorithms = ALGORITHMS }: ConformanceOptions = {},
): void {
  const fallback = algorithms.includes('sliding-log') ? undefined : algorithms[0]
  const withSlidingLog = algorithms.includes('sliding-log') ? it : it.skip
  describe(`${name} store conformance`, () => {
    let harness: StoreHarness
    beforeAll(async () => {
      harness = await setup()
    })
    afterAll(async () => {
      await harness.close()
    })

    /**
     * The keys that hold state. A Redis store also writes an operation's key for each refund,
     * undo and reset (lua/lib/operation.lua), which holds no state and lives a minute, whatever
     * the rule's periods, and a reset leaves a mark beside each key it forgot (lua/reset.lua):
     * checked here, then left out.
     */
    async function stateKeys(): Promise<Array<{ key: string; ttlMs: number }>> {
      const keys = await harness.keys()
      for (const { key, ttlMs } of keys) {
        if (isOperationKey(key)) expect(ttlMs).toBeLessThanOrEqual(60_000)
        if (holdsNoState(key)) expect(ttlMs).toBeGreaterThan(0)
      }
      return keys.filter(({ key }) => !holdsNoState(key))
    }

    function limiterFor(given: RulesOptions) {
      const clock = new ManualClock(T0)
      const store = harness.makeStore(clock.now)
      const rules = withAlgorithm(given, fallback)
      // The store's answers are what is checked, not how fast they come: a loaded machine
      // answering later than the default 100 ms must not turn them into fail-open decisions.
      const limiter = createLimiter({ store, rules, onWarning: () => {}, storeTimeoutMs: ANSWER_WITHIN_MS })
      return { limiter, clock, store }
    }

    describe.each(algorithms)('%s', (algorithm) => {
      const rules = { r: { algorithm, windows: [{ limit: 5, period: '10s' }] } } satisfies RulesOptions

      it('admits exactly the limit, then refuses and says when the request fits', async () => {
        const { limiter, clock } = limiterFor(rules)
        for (let i = 4; i >= 0; i--) {
          const d = await limiter.consume('r', 'ip:1')
          expect(d).toMatchObject({ allowed: true, reason: 'ok', retryAfterMs: 0 })
          expect(d.windows).toEqual([
            expect.objectContaining({
              rule: 'r',
              identifier: 'ip:1',
              limit: 5,
              periodMs: 10_000,
              remaining: i,
              failed: false,
            }),
          ])
        }
        const denied = await limiter.consume('r', 'ip:1')
        const retry = RETRY_AFTER_BURST[algorithm]
        expect(denied).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: retry, nowMs: T0 })
        expect(denied.windows[0]).toMatchObject({ remaining: 0, failed: true, resetAtMs: T0 + retry })

        clock.advance(retry - 1)
        expect((await limiter.consume('r', 'ip:1')).allowed).toBe(false)
        clock.advance(1)
        expect((await limiter.consume('r', 'ip:1')).allowed).toBe(true)
        await limiter.close()
      })

      it('charges weighted cost, refuses what does not fit, and never passes a cost above the limit', async () => {
        const { limiter } = limiterFor({ r: { algorithm, windows: [{ limit: 10, period: '10s' }] } })
        expect((await limiter.consume('r', 'u', { cost: 4 })).windows[0]?.remaining).toBe(6)
        expect((await limiter.consume('r', 'u', { cost: 4 })).windows[0]?.remaining).toBe(2)
        const tooMuch = await limiter.consume('r', 'u', { cost: 3 })
        expect(tooMuch).toMatchObject({ allowed: false })
        expect(tooMuch.windows[0]).toMatchObject({ remaining: 2, failed: true })
        expect((await limiter.consume('r', 'u', { cost: 2 })).windows[0]?.remaining).toBe(0)

        const { limiter: fresh } = limiterFor({ r: { algorithm, windows: [{ limit: 10, period: '10s' }] } })
        const never = await fresh.consume('r', 'u', { cost: 11 })
        expect(never).toMatchObject({ allowed: false, retryAfterMs: Number.POSITIVE_INFINITY })
        expect(never.windows[0]).toMatchObject({ remaining: 10, failed: true })
        const free = await fresh.consume('r', 'u', { cost: 0 })
        expect(free).toMatchObject({ allowed: true })
        expect(free.windows[0]?.remaining).toBe(10)
        await limiter.close()
        await fresh.close()
      })

      it('peek answers like consume and charges nothing', async () => {
        const { limiter } = limiterFor(rules)
        for (let i = 0; i < 10; i++) expect((await limiter.peek('r', 'ip:1')).windows[0]?.remaining).toBe(5)
        await limiter.consume('r', 'ip:1', { cost: 5 })
        const peeked = await limiter.peek('r', 'ip:1')
        const consumed = await limiter.consume('r', 'ip:1')
        expect(peeked).toEqual(consumed)
        await limiter.close()
      })

      it('refund gives units back, never above the limit', async () => {
        const { limiter } = limiterFor({ r: { algorithm, windows: [{ limit: 10, period: '10s' }] } })
        await limiter.consume('r', 'u', { cost: 3 })
        await limiter.consume('r', 'u', { cost: 4 })
        const refunded = await limiter.refund('r', 'u', { cost: 2 })
        expect(refunded).toMatchObject({ allowed: true })
        expect(refunded.windows[0]?.remaining).toBe(5)
        expect((await limiter.refund('r', 'u', { cost: 100 })).windows[0]?.remaining).toBe(10)
        expect((await limiter.consume('r', 'u', { cost: 10 })).allowed).toBe(true)
        await limiter.close()
      })

      it('reset forgets the state and removes its keys', async () => {
        const { limiter } = limiterFor(rules)
        await limiter.consume('r', 'ip:1', { cost: 5 })
        expect(await stateKeys()).not.toEqual([])
        await limiter.reset('r', 'ip:1')
        // What stays, on a Redis store, is the reset's operation key, which lives a minute so
        // that the reset sent again after a lost reply deletes nothing (lua/lib/operation.lua),
        // and its mark beside the key, twice the longest period (lua/reset.lua).
        const left = await harness.keys()
        expect(left.filter(({ key }) => !holdsNoState(key))).toEqual([])
        for (const { ttlMs } of left) expect(ttlMs).toBeGreaterThan(0)
        for (const { ttlMs } of left) expect(ttlMs).toBeLessThanOrEqual(120_000)
        expect((await limiter.consume('r', 'ip:1')).windows[0]?.remaining).toBe(4)
        await limiter.close()
      })

      it('gives every key it writes a TTL no longer than the state can matter', async () => {
        const { limiter, clock } = limiterFor({
          r: {
            algorithm,
            windows: [
              { limit: 7, period: '3s' },
              { limit: 20, period: '1m' },
            ],
          },
        })
        for (let i = 0; i < 30; i++) {
          await limiter.consume('r', ['ip:1', `user:${i % 3}`], { cost: 1 + (i % 2) })
          if (i % 7 === 0) await limiter.refund('r', 'ip:1')
          clock.advance(450)
        }
        const keys = await stateKeys()
        expect(keys.length).toBe(4)
        // A sliding window's count still weighs one period after its own ends.
        const bound = algorithm === 'sliding-window' ? 120_000 : 60_000
        for (const { ttlMs } of keys) {
          expect(ttlMs).toBeGreaterThan(0)
          expect(ttlMs).toBeLessThanOrEqual(bound)
        }
        await limiter.close()
      })
    })

    it('charges nothing to a window when another window refuses (20 per 60 s and 5 per 3 s)', async () => {
      const { limiter, clock } = limiterFor({
        'auth.createToken': {
          windows: [
            { limit: 20, period: '60s' },
            { limit: 5, period: '3s' },
          ],
        },
      })
      const id = 'ip:203.0.113.7'
      for (let i = 0; i < 5; i++) await limiter.consume('auth.createToken', id)
      const burst = await limiter.consume('auth.createToken', id)
      expect(burst).toMatchObject({ allowed: false, retryAfterMs: 3_000 })
      expect(burst.windows).toEqual([
        {
          rule: 'auth.createToken',
          identifier: id,
          limit: 20,
          periodMs: 60_000,
          remaining: 15,
          resetAtMs: T0 + 60_000,
          failed: false,
        },
        {
          rule: 'auth.createToken',
          identifier: id,
          limit: 5,
          periodMs: 3_000,
          remaining: 0,
          resetAtMs: T0 + 3_000,
          failed: true,
        },
      ])
      // Three more bursts of five, 3 s apart, use up the minute.
      for (let round = 1; round <= 3; round++) {
        clock.set(T0 + round * 3_000)
        for (let i = 0; i < 5; i++) expect((await limiter.consume('auth.createToken', id)).allowed).toBe(true)
      }
      clock.set(T0 + 12_000)
      const minute = await limiter.consume('auth.createToken', id)
      expect(minute).toMatchObject({ allowed: false, retryAfterMs: 48_000 })
      expect(minute.windows).toEqual([
        {
          rule: 'auth.createToken',
          identifier: id,
          limit: 20,
          periodMs: 60_000,
          remaining: 0,
          resetAtMs: T0 + 60_000,
          failed: true,
        },
        {
          rule: 'auth.createToken',
          identifier: id,
          limit: 5,
          periodMs: 3_000,
          remaining: 5,
          resetAtMs: T0 + 12_000,
          failed: false,
        },
      ])
      // Refused requests charged nothing to the 3 s window: it still has all five.
      for (let i = 0; i < 10; i++) await limiter.consume('auth.createToken', id)
      expect((await limiter.peek('auth.createToken', id)).windows[1]?.remaining).toBe(5)
      // At 60 s the first burst leaves the minute; the three later ones (15) are still in it. A
      // fixed window (a store without the sliding log) starts a new minute.
      clock.set(T0 + 60_000)
      expect((await limiter.consume('auth.createToken', id)).windows.map((w) => w.remaining)).toEqual(
        fallback === 'fixed-window' ? [19, 4] : [4, 4],
      )
      await limiter.close()
    })

    it('decides 10/s + 120/min + 240/h for IP and user in one call', async () => {
      const { limiter, clock } = limiterFor({
        login: {
          windows: [
            { limit: 10, period: '1s' },
            { limit: 120, period: '1m' },
            { limit: 240, period: '1h' },
          ],
        },
      })
      const ids = ['ip:198.51.100.4', 'user:42']
      for (let second = 0; second < 12; second++) {
        clock.set(T0 + second * 1_000)
        for (let i = 0; i < 10; i++) expect((await limiter.consume('login', ids)).allowed).toBe(true)
        const over = await limiter.consume('login', ids)
        expect(over.allowed).toBe(false)
        expect(over.windows.filter((w) => w.failed).map((w) => `${w.identifier}/${w.periodMs}`)).toEqual(
          second < 11
            ? ['ip:198.51.100.4/1000', 'user:42/1000']
            : ['ip:198.51.100.4/1000', 'ip:198.51.100.4/60000', 'user:42/1000', 'user:42/60000'],
        )
      }
      clock.set(T0 + 12_000)
      const d = await limiter.consume('login', ids)
      expect(d).toMatchObject({ allowed: false, retryAfterMs: 48_000 })
      expect(d.windows.map((w) => [w.identifier, w.periodMs, w.remaining, w.failed])).toEqual([
        ['ip:198.51.100.4', 1_000, 10, false],
        ['ip:198.51.100.4', 60_000, 0, true],
        ['ip:198.51.100.4', 3_600_000, 120, false],
        ['user:42', 1_000, 10, false],
        ['user:42', 60_000, 0, true],
        ['user:42', 3_600_000, 120, false],
      ])
      await limiter.close()
    })

    it('refuses for every identifier when one is exhausted, charging none of them', async () => {
      const { limiter } = limiterFor({ login: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '10s' }] } })
      for (let i = 0; i < 3; i++) await limiter.consume('login', ['ip:b', 'user:1'])
      const d = await limiter.consume('login', ['ip:a', 'user:1'])
      expect(d.allowed).toBe(false)
      expect(d.windows.map((w) => [w.identifier, w.remaining, w.failed])).toEqual([
        ['ip:a', 3, false],
        ['user:1', 0, true],
      ])
      expect((await limiter.peek('login', 'ip:a')).windows[0]?.remaining).toBe(3)
      await limiter.close()
    })

    it('checks parent rules in the same decision and charges neither side on refusal', async () => {
      const { limiter } = limiterFor({
        'api.write': { algorithm: 'gcra', windows: [{ limit: 2, period: '10s' }], parent: 'api' },
        api: { algorithm: 'token-bucket', windows: [{ limit: 3, period: '10s' }] },
      })
      expect((await limiter.consume('api.write', 'user:1')).windows.map((w) => [w.rule, w.remaining])).toEqual([
        ['api.write', 1],
        ['api', 2],
      ])
      await limiter.consume('api.write', 'user:1')
      const child = await limiter.consume('api.write', 'user:1')
      expect(child.windows.map((w) => [w.rule, w.remaining, w.failed])).toEqual([
        ['api.write', 0, true],
        ['api', 1, false],
      ])
      await limiter.consume('api', 'user:2', { cost: 3 })
      const parent = await limiter.consume('api.write', 'user:2')
      expect(parent.windows.map((w) => [w.rule, w.remaining, w.failed])).toEqual([
        ['api.write', 2, false],
        ['api', 0, true],
      ])
      expect((await limiter.peek('api.write', 'user:2')).windows[0]?.remaining).toBe(2)
      await limiter.close()
    })

    withSlidingLog('keeps a sliding log exact: no interval of one period ever holds more than the limit', async () => {
      const { limiter, clock } = limiterFor({ r: { windows: [{ limit: 7, period: 1_000 }] } })
      const admitted: Array<[number, number]> = []
      const random = seededRandom(7)
      for (let i = 0; i < 400; i++) {
        clock.advance(random(120))
        const cost = 1 + random(3)
        const d = await limiter.consume('r', 'k', { cost })
        const now = clock.nowMs
        const inWindow = admitted.filter(([t]) => t > now - 1_000).reduce((sum, [, c]) => sum + c, 0)
        // Exact both ways: admitted iff it fits, refused iff it does not.
        expect(d.allowed).toBe(inWindow + cost <= 7)
        if (d.allowed) admitted.push([now, cost])
        else expect(d.retryAfterMs).toBeGreaterThan(0)
      }
      for (const [start] of admitted) {
        const units = admitted.filter(([t]) => t >= start && t < start + 1_000).reduce((sum, [, c]) => sum + c, 0)
        expect(units).toBeLessThanOrEqual(7)
      }
      await limiter.close()
    })

    describe('large quotas, clock skew, refunds across a rollover, bad clocks', () => {
      const DAY = 86_400_000
      const MAX = Number.MAX_SAFE_INTEGER
      // 1 GB per day, 10 GB per hour, 100 GB per 30 days, and the extremes of limit and period.
      const QUOTAS: ReadonlyArray<readonly [string, number, number]> = [
        ['1 GB per day', 1e9, DAY],
        ['10 GB per hour', 1e10, 3_600_000],
        ['100 GB per 30 days', 1e11, 30 * DAY],
        ['2^53 − 1 per ms', MAX, 1],
        ['2^53 − 1 per 366 days', MAX, 366 * DAY],
      ]

      /** The same limit over a second, different period: a rule of two windows. */
      function otherPeriod(periodMs: number): number {
        return periodMs === 1 ? 2 : Math.floor(periodMs / 2)
      }

      describe.each(algorithms)('%s', (algorithm) => {
        describe.each(QUOTAS)('%s', (_, limit, periodMs) => {
          const shapes: ReadonlyArray<[string, RulesOptions, string[]]> = [
            ['one window, one identifier', { r: { algorithm, windows: [{ limit, period: periodMs }] } }, ['ip:a']],
            [
              'two windows, two identifiers',
              {
                r: {
                  algorithm,
                  windows: [
                    { limit, period: periodMs },
                    { limit, period: otherPeriod(periodMs) },
                  ],
                },
              },
              ['ip:a', 'user:1'],
            ],
            [
              'a parent',
              {
                r: { algorithm, windows: [{ limit, period: periodMs }], parent: 'root' },
                root: { algorithm, windows: [{ limit, period: otherPeriod(periodMs) }] },
              },
              ['ip:a'],
            ],
          ]

          // Each test's decisions go out in one turn of the event loop, so one script call on
          // Redis: a key of a 1 ms period lives 1 ms of Redis's own clock, which runs on between
          // calls whatever the injected clock says.
          it.each(shapes)('were refused; now count to the unit (%s)', async (_shape, rules, ids) => {
            const { limiter, clock } = limiterFor(rules)
            const longest = Math.max(periodMs, otherPeriod(periodMs))
            const [first, over, last, whole, refunded, again] = await Promise.all([
              limiter.consume('r', ids, { cost: limit - 1 }),
              limiter.consume('r', ids, { cost: 2 }),
              limiter.consume('r', ids, { cost: 1 }),
              limiter.peek('r', ids, { cost: limit }),
              limiter.refund('r', ids, { cost: limit }),
              limiter.consume('r', ids, { cost: limit }),
            ])
            const each = (n: number) => first.windows.map(() => n)
            expect(first.allowed).toBe(true)
            expect(first.windows.map((w) => w.remaining)).toEqual(each(1))
            expect(over.allowed).toBe(false)
            expect(over.windows.map((w) => w.remaining)).toEqual(each(1))
            expect(over.retryAfterMs).toBeGreaterThan(0)
            expect(over.retryAfterMs).toBeLessThanOrEqual(2 * longest)
            expect(last.allowed).toBe(true)
            expect(last.windows.map((w) => w.remaining)).toEqual(each(0))
            expect(whole.allowed).toBe(false)
            expect(refunded.windows.map((w) => w.remaining)).toEqual(each(limit))
            expect(again.allowed).toBe(true)
            expect(again.windows.map((w) => w.remaining)).toEqual(each(0))
            // A key of a 1 ms period may be gone (-2) by the time Redis is asked; none lacks a TTL (-1).
            // A sliding log's key lives at least 100 ms in Redis (lua/lib/expire.lua).
            for (const { ttlMs } of await stateKeys()) {
              expect(ttlMs).not.toBe(-1)
              expect(ttlMs).toBeLessThanOrEqual(Math.max(2 * longest, 100))
            }
            clock.advance(2 * longest)
            const later = await limiter.peek('r', ids, { cost: limit })
            expect(later.allowed).toBe(true)
            expect(later.windows.map((w) => w.remaining)).toEqual(each(limit))
            await limiter.close()
          })

          it('weighs what a drained window has refilled or still counts to the unit', async () => {
            const { limiter, clock } = limiterFor({ r: { algorithm, windows: [{ limit, period: periodMs }] } })
            const L = BigInt(limit)
            const P = BigInt(periodMs)
            const index = Math.floor(T0 / periodMs)
            for (const fraction of [0.000_001, 0.37, 0.999_999]) {
              // `elapsed` ms after the drain, or into the next window for a sliding window, whose
              // drained window is then the previous one.
              const elapsed = Math.floor(periodMs * fraction)
              const at = algorithm === 'sliding-window' ? (index + 1) * periodMs + elapsed : T0 + elapsed
              await limiter.reset('r', 'ip:a')
              clock.set(T0)
              const drained = limiter.consume('r', 'ip:a', { cost: limit })
              clock.set(at)
              const [, peeked] = await Promise.all([drained, limiter.peek('r', 'ip:a')])
              const remaining = BigInt(peeked.windows[0]?.remaining ?? -1)
              if (algorithm === 'sliding-window') {
                // limit − ceil(limit × overlap / period), exactly.
                const overlap = P - BigInt(elapsed)
                expect(remaining).toBe(L - (L * overlap + P - 1n) / P)
              } else if (algorithm === 'token-bucket' || algorithm === 'gcra') {
                // Exact, floor(elapsed × limit / period), where limit × period / gcd stays below
                // 2^53; else a token is floor((2^53 − 1) / limit) units refilled at
                // ceil(capacity / period) a ms: at most 2 × period / (2^53 − 1) of the refill more.
                const exact = (BigInt(elapsed) * L) / P
                expect(remaining >= exact).toBe(true)
                expect(Number(remaining - exact)).toBeLessThanOrEqual(Math.ceil((2 * elapsed * limit) / MAX) + 1)
              } else {
                expect(remaining).toBe(algorithm === 'fixed-window' && Math.floor(at / periodMs) !== index ? L : 0n)
              }
            }
            await limiter.close()
          })
        })

        // A clock a day (a year) fast on one app server and right on another: what the fast one
        // wrote must hold the identifier for one period of the right clock at most, not the skew.
        describe.each([
          ['a day', DAY, '10s', 10_000],
          ['a year', 366 * DAY, '1d', DAY],
        ] as const)('state stamped %s ahead', (_, skew, period, periodMs) => {
          const bound = algorithm === 'sliding-window' ? 2 * periodMs : periodMs
          const shapes: ReadonlyArray<[string, RulesOptions, string[]]> = [
            ['one window, one identifier', { r: { algorithm, windows: [{ limit: 5, period }] } }, ['ip:a']],
            [
              'two windows, two identifiers',
              {
                r: {
                  algorithm,
                  windows: [
                    { limit: 5, period },
                    { limit: 7, period: periodMs / 2 },
                  ],
                },
              },
              ['ip:a', 'user:1'],
            ],
            [
              'a parent',
              {
                r: { algorithm, windows: [{ limit: 5, period }], parent: 'root' },
                root: { algorithm: fallback ?? 'sliding-log', windows: [{ limit: 100, period: periodMs / 2 }] },
              },
              ['ip:a'],
            ],
          ]

          it.each(shapes)('locked the identifier out for the whole skew (%s)', async (_shape, rules, ids) => {
            const { limiter, clock } = limiterFor(rules)
            clock.set(T0 + skew)
            expect((await limiter.consume('r', ids, { cost: 5 })).allowed).toBe(true)
            clock.set(T0)
            const peeked = await limiter.peek('r', ids)
            expect(peeked.allowed).toBe(false)
            expect(peeked.retryAfterMs).toBeGreaterThan(0)
            expect(peeked.retryAfterMs).toBeLessThanOrEqual(bound)
            for (const w of peeked.windows) expect(w.resetAtMs - T0).toBeLessThanOrEqual(bound)
            for (const { ttlMs } of await stateKeys()) {
              expect(ttlMs).toBeGreaterThan(0)
              expect(ttlMs).toBeLessThanOrEqual(bound)
            }
            const refused = await limiter.consume('r', ids)
            expect(refused).toMatchObject({ allowed: false, retryAfterMs: peeked.retryAfterMs })
            clock.advance(refused.retryAfterMs - 1)
            expect((await limiter.consume('r', ids)).allowed).toBe(false)
            clock.advance(1)
            expect((await limiter.consume('r', ids)).allowed).toBe(true)
            for (const { ttlMs } of await stateKeys()) expect(ttlMs).toBeLessThanOrEqual(bound)
            await limiter.close()
          })
        })

        // 10 per 1 s, a cost of 4 charged at 0.9 s and refunded at 1.1 s, after the window rolled over.
        it('gave nothing back once the window had rolled over (one window)', async () => {
          const { limiter, clock } = limiterFor({ r: { algorithm, windows: [{ limit: 10, period: '1s' }] } })
          clock.set(T0 + 900)
          expect((await limiter.consume('r', 'ip:a', { cost: 4 })).windows[0]?.remaining).toBe(6)
          clock.set(T0 + 1_100)
          expect((await limiter.refund('r', 'ip:a', { cost: 4 })).windows[0]?.remaining).toBe(10)
          expect((await limiter.peek('r', 'ip:a', { cost: 10 })).allowed).toBe(true)
          await limiter.close()
        })

        it('gave back unevenly once one window had rolled over (two windows, two identifiers, a parent)', async () => {
          const { limiter, clock } = limiterFor({
            r: {
              algorithm,
              windows: [
                { limit: 10, period: '1s' },
                { limit: 30, period: '10s' },
              ],
              parent: 'root',
            },
            root: { algorithm, windows: [{ limit: 50, period: '1m' }] },
          })
          clock.set(T0 + 900)
          await limiter.consume('r', ['ip:a', 'user:1'], { cost: 4 })
          clock.set(T0 + 1_100)
          const refunded = await limiter.refund('r', ['ip:a', 'user:1'], { cost: 4 })
          expect(refunded.windows.map((w) => w.remaining)).toEqual([10, 30, 10, 30, 50, 50])
          await limiter.close()
        })

        it('takes a clock that returns no time as a store failure, and writes nothing', async () => {
          let time: unknown = T0
          const store = harness.makeStore(() => time as number)
          const rules: RulesOptions = { r: { algorithm, windows: [{ limit: 5, period: '10s' }] } }
          // A limiter per value: on Redis, failures open the limiter's circuit breaker.
          const limiters = [createLimiter({ store, rules, storeTimeoutMs: ANSWER_WITHIN_MS })]
          await limiters[0]?.consume('r', 'ip:a', { cost: 2 })
          for (const [bad, shown] of [
            [Number.NaN, 'NaN'],
            ['1700000000000', '"1700000000000"'],
            [T0 + 0.5, String(T0 + 0.5)],
            [-1, '-1'],
            [1e20, '100000000000000000000'],
          ] as const) {
            const limiter = createLimiter({ store, rules, storeTimeoutMs: ANSWER_WITHIN_MS })
            limiters.push(limiter)
            time = bad
            const message = `clock returned ${shown}`
            await expect(limiter.refund('r', 'ip:a', { cost: 2 })).rejects.toMatchObject({ code: 'TG_STORE' })
            await expect(limiter.refund('r', 'ip:a', { cost: 2 })).rejects.toThrow(message)
            const decision = await limiter.consume('r', 'ip:a', { cost: 1 })
            expect(decision.error).toMatchObject({ code: 'TG_STORE' })
            expect(decision.error?.message).toContain(message)
            time = T0
            expect((await (limiters[0] as Limiter).peek('r', 'ip:a')).windows[0]?.remaining).toBe(3)
          }
          for (const limiter of limiters) await limiter.close()
        })
      })

      it('gave back only the current bucket of a sliding window that had rolled over', async () => {
        const { limiter, clock } = limiterFor({
          r: { algorithm: 'sliding-window', windows: [{ limit: 10, period: '1s' }] },
        })
        clock.set(T0 + 500)
        await limiter.consume('r', 'ip:a', { cost: 4 })
        clock.set(T0 + 1_100)
        await limiter.consume('r', 'ip:a', { cost: 3 })
        // Current 3 − 3, previous 4 − 2, which weighs ceil(2 × 0.9) = 2.
        expect((await limiter.refund('r', 'ip:a', { cost: 5 })).windows[0]?.remaining).toBe(8)
        await limiter.close()
      })
    })

    describeShedding(() => harness, algorithms, fallback)
    describeIdentifierRules(() => harness, fallback)
    describeLockouts(() => harness, algorithms)
    describeReservations(() => harness, algorithms)

    describe('reset and parent rules', () => {
      const rules = {
        api: { windows: [{ limit: 5, period: '10s' }] },
        'api.login': { windows: [{ limit: 2, period: '10s' }], parent: 'api' },
        'api.search': { windows: [{ limit: 5, period: '10s' }], parent: 'api' },
      } satisfies RulesOptions

      /** user:1 spends 2 on api.search and 2 on api.login (4 of api's 5); user:2 spends 1 on api.login. */
      async function spent() {
        const made = limiterFor(rules)
        for (let i = 0; i < 2; i++) await made.limiter.consume('api.search', 'user:1')
        for (let i = 0; i < 2; i++) await made.limiter.consume('api.login', 'user:1')
        await made.limiter.consume('api.login', 'user:2')
        return made
      }

      async function remaining(limiter: Limiter, rule: string, identifier: string) {
        return (await limiter.peek(rule, identifier)).windows.map((w) => [w.rule, w.remaining])
      }

      // Regression: resetting a child rule forgot its parent's state too, handing back what the
      // identifier had spent on the parent through the child's siblings.
      it("forgets only the rule's own windows by default (it forgot the parent's too)", async () => {
        const { limiter } = await spent()
        await limiter.reset('api.login', 'user:1')
        expect(await remaining(limiter, 'api.login', 'user:1')).toEqual([
          ['api.login', 2],
          ['api', 1],
        ])
        expect(await remaining(limiter, 'api.search', 'user:1')).toEqual([
          ['api.search', 3],
          ['api', 1],
        ])
        expect(await remaining(limiter, 'api.login', 'user:2')).toEqual([
          ['api.login', 1],
          ['api', 4],
        ])
        // api and api.search for user:1, api.login and api for user:2.
        expect(await stateKeys()).toHaveLength(4)
        await limiter.close()
      })

      it('forgets the parents too with { parents: true }, never a sibling', async () => {
        const { limiter } = await spent()
        await limiter.reset('api.login', 'user:1', { parents: true })
        expect(await remaining(limiter, 'api.login', 'user:1')).toEqual([
          ['api.login', 2],
          ['api', 5],
        ])
        expect(await remaining(limiter, 'api.search', 'user:1')).toEqual([
          ['api.search', 3],
          ['api', 5],
        ])
        expect(await stateKeys()).toHaveLength(3)
        await limiter.close()
      })

      it('forgets a parent alone, leaving its children', async () => {
        const { limiter } = await spent()
        await limiter.reset('api', ['user:1', 'user:2'])
        expect(await remaining(limiter, 'api.login', 'user:1')).toEqual([
          ['api.login', 0],
          ['api', 5],
        ])
        expect(await remaining(limiter, 'api.login', 'user:2')).toEqual([
          ['api.login', 1],
          ['api', 5],
        ])
        await limiter.close()
      })
    })
  })
}
