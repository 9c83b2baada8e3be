import {
  ALGORITHMS,
  type AlgorithmName,
  createLimiter,
  type Limiter,
  type RulesOptions,
  type Store,
} from '@tollgate/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from './manual-clock.js'
import { seededRandom } from './seeded-random.js'

export interface StoreHarness {
  /** A store over state no other test touches, reading time from `clock`. */
  makeStore(clock: () => number): Store
  /** Every key the store made holds, with its remaining TTL in ms (-1: none). */
  keys(): Promise<Array<{ key: string; ttlMs: number }>>
  close(): Promise<void>
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

/** The conformance suite every store runs unchanged. */
export function runStoreConformance(name: string, setup: () => Promise<StoreHarness>): void {
  describe(`${name} store conformance`, () => {
    let harness: StoreHarness
    beforeAll(async () => {
      harness = await setup()
    })
    afterAll(async () => {
      await harness.close()
    })

    function limiterFor(rules: RulesOptions) {
      const clock = new ManualClock(T0)
      const store = harness.makeStore(clock.now)
      const limiter = createLimiter({ store, rules, onWarning: () => {} })
      return { limiter, clock, store }
    }

    describe.each(ALGORITHMS)('%s', (algorithm) => {
      const rules = { r: { algorithm, windows: [{ limit: 5, period: '10s' }] } }

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
        expect(await harness.keys()).not.toEqual([])
        await limiter.reset('r', 'ip:1')
        expect(await harness.keys()).toEqual([])
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
        const keys = await harness.keys()
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
      // At 60 s the first burst leaves the minute; the three later ones (15) are still in it.
      clock.set(T0 + 60_000)
      expect((await limiter.consume('auth.createToken', id)).windows.map((w) => w.remaining)).toEqual([4, 4])
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

    it('keeps a sliding log exact: no interval of one period ever holds more than the limit', async () => {
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

    describe('reset and parent rules', () => {
      const rules = {
        api: { windows: [{ limit: 5, period: '10s' }] },
        'api.login': { windows: [{ limit: 2, period: '10s' }], parent: 'api' },
        'api.search': { windows: [{ limit: 5, period: '10s' }], parent: 'api' },
      }

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
        expect(await harness.keys()).toHaveLength(4)
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
        expect(await harness.keys()).toHaveLength(3)
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
