import { ALGORITHMS, type AlgorithmName, createLimiter, type Decision, type RulesOptions } from '@tollgate/core'
import { describe, expect, it } from 'vitest'
import { ManualClock } from './manual-clock.js'
import { seededUniform } from './seeded-random.js'
import type { StoreHarness } from './store-conformance.js'
import { withAlgorithm } from './with-algorithm.js'

/** A time aligned to every period used below, so fixed windows start at the clock's start. */
const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000)

/**
 * 10 per 10 s shedding from 4, holding 6: when a request of 1 stops being shed (its use after the
 * cost back at 4), by algorithm.
 */
const RETRY_AFTER_SHED: Readonly<Record<AlgorithmName, number>> = {
  'sliding-log': 10_000,
  'fixed-window': 10_000,
  // The 6 become the previous window at 10 s and weigh ceil(6 × overlap / 10 s) ≤ 3 from 15 s.
  'sliding-window': 15_000,
  // One token a second: 3 of the 6 are back after 3 s.
  'token-bucket': 3_000,
  gcra: 3_000,
}

/** A random source that answers `values` in turn, repeating the last, and counts its calls. */
function scripted(...values: number[]) {
  const source = { calls: 0, random: () => values[Math.min(source.calls++, values.length - 1)] as number }
  return source
}

/** Shedding (`lowBurst`), as every store must decide it: run inside the store conformance suite. */
export function describeShedding(
  harnessOf: () => StoreHarness,
  algorithms: readonly AlgorithmName[] = ALGORITHMS,
  /** What rules that name no algorithm take, on a store without the sliding log. */
  fallback?: AlgorithmName,
): void {
  describe('shedding between lowBurst and the limit', () => {
    function limiterFor(rules: RulesOptions, random: () => number) {
      const clock = new ManualClock(T0)
      const store = harnessOf().makeStore(clock.now)
      // Thousands of decisions in flight at once must not time out on a busy machine.
      const limiter = createLimiter({
        store,
        rules: withAlgorithm(rules, fallback),
        random,
        storeTimeoutMs: 30_000,
        onWarning: () => {},
      })
      return { limiter, clock, store }
    }

    describe.each(algorithms)('%s', (algorithm) => {
      // 100 per 10 s shedding from 20: a request of 1 over 43 held leaves 44, p = 24 / 80 = 0.3.
      it('refuses 30% ± 2% of 10,000 peeks at a use of 44 between lowBurst 20 and limit 100', async () => {
        const rules = {
          r: { algorithm, windows: [{ limit: 100, period: '10s', lowBurst: 20 }] },
        } satisfies RulesOptions
        const { limiter, store } = limiterFor(rules, seededUniform(ALGORITHMS.indexOf(algorithm) + 11))
        // The same rule without lowBurst, on the same store, charges the 43 without a draw.
        const charger = createLimiter({ store, rules: { r: { algorithm, windows: [{ limit: 100, period: '10s' }] } } })
        expect((await charger.consume('r', 'ip:a', { cost: 43 })).allowed).toBe(true)
        // A peek charges nothing and the clock stands still: every one of them sees the use at 43.
        const reasons = { ok: 0, shed: 0, other: 0 }
        for (let chunk = 0; chunk < 20; chunk++) {
          const decisions = await Promise.all(Array.from({ length: 500 }, () => limiter.peek('r', 'ip:a')))
          for (const d of decisions) reasons[d.reason === 'ok' || d.reason === 'shed' ? d.reason : 'other']++
        }
        expect(reasons.other).toBe(0)
        expect(Math.abs(reasons.shed / 10_000 - 0.3)).toBeLessThanOrEqual(0.02)
        expect((await limiter.peek('r', 'ip:a', { cost: 0 })).windows[0]?.remaining).toBe(57)
        await limiter.close()
      })

      it('never sheds up to lowBurst, even drawing 0, and sheds from the first unit above it', async () => {
        const { limiter } = limiterFor(
          { r: { algorithm, windows: [{ limit: 12, period: '10s', lowBurst: 4 }] } },
          () => 0,
        )
        for (let i = 0; i < 4; i++) expect((await limiter.consume('r', 'ip:a')).reason).toBe('ok')
        expect((await limiter.consume('r', 'ip:a')).reason).toBe('shed')
        expect((await limiter.peek('r', 'ip:a', { cost: 0 })).windows[0]?.remaining).toBe(8)
        await limiter.close()
      })

      // A use of 5 after the cost, between 4 and 12: p = 1 / 8, exact in binary.
      it('sheds exactly when the draw is below p (1/8 at a use of 5 of 12, lowBurst 4)', async () => {
        const source = scripted(0, 0.125, 0.125 - 2 ** -55, 0.125 + 2 ** -55)
        const { limiter } = limiterFor(
          { r: { algorithm, windows: [{ limit: 12, period: '10s', lowBurst: 4 }] } },
          source.random,
        )
        await limiter.consume('r', 'ip:a', { cost: 4 })
        const [atP, belowP, aboveP] = [
          await limiter.peek('r', 'ip:a'),
          await limiter.peek('r', 'ip:a'),
          await limiter.peek('r', 'ip:a'),
        ]
        expect([atP.reason, belowP.reason, aboveP.reason]).toEqual(['ok', 'shed', 'ok'])
        await limiter.close()
      })

      it('charges nothing for a shed decision, to any window, identifier or parent, and says when it stops', async () => {
        const rules = {
          child: {
            algorithm,
            windows: [
              { limit: 10, period: '10s', lowBurst: 4 },
              { limit: 50, period: '1m' },
            ],
            parent: 'root',
          },
          root: { algorithm, windows: [{ limit: 100, period: '1m', lowBurst: 90 }] },
        } satisfies RulesOptions
        // Every draw 0 but the first: the charge of 6 is admitted, then every request that can be shed is.
        const source = scripted(0.999, 0)
        const { limiter, clock } = limiterFor(rules, source.random)
        const ids = ['ip:a', 'user:1']
        expect((await limiter.consume('child', ids, { cost: 6 })).reason).toBe('ok')
        const before = await harnessOf().snapshot()
        // The charge of 6 is in the state compared, or the comparison below would prove nothing.
        expect(Object.keys(before)).not.toHaveLength(0)
        const shed = await limiter.consume('child', ids)
        expect(await harnessOf().snapshot()).toEqual(before)
        const retry = RETRY_AFTER_SHED[algorithm]
        expect(shed).toMatchObject({ allowed: false, reason: 'shed', retryAfterMs: retry, nowMs: T0 })
        expect(shed.windows.map((w) => [w.rule, w.identifier, w.periodMs, w.remaining, w.failed])).toEqual([
          ['child', 'ip:a', 10_000, 4, true],
          ['child', 'ip:a', 60_000, 44, false],
          ['child', 'user:1', 10_000, 4, true],
          ['child', 'user:1', 60_000, 44, false],
          ['root', 'ip:a', 60_000, 94, false],
          ['root', 'user:1', 60_000, 94, false],
        ])
        // One draw per decision, whatever its windows, identifiers and parents.
        expect(source.calls).toBe(2)
        clock.advance(retry - 1)
        expect((await limiter.consume('child', ids)).reason).toBe('shed')
        clock.advance(1)
        expect((await limiter.consume('child', ids)).reason).toBe('ok')
        expect(source.calls).toBe(4)
        await limiter.close()
      })

      it('waits at least 1 ms after a shed whose cost is above lowBurst, on a window that holds nothing', async () => {
        const { limiter } = limiterFor(
          { r: { algorithm, windows: [{ limit: 10, period: '10s', lowBurst: 4 }] } },
          () => 0,
        )
        const shed = await limiter.consume('r', 'ip:a', { cost: 5 })
        expect(shed).toMatchObject({ allowed: false, reason: 'shed', retryAfterMs: 1 })
        expect(shed.windows[0]).toMatchObject({ remaining: 10, failed: true })
        await limiter.close()
      })

      it('limits rather than sheds a decision that one window cannot fit', async () => {
        // Drawing 0, ip:a's window at 7 of 10 would shed the request, but user:1's has no room for it.
        const { limiter } = limiterFor(
          { r: { algorithm, windows: [{ limit: 10, period: '10s', lowBurst: 4 }] } },
          () => 0,
        )
        const fill = createLimiter({
          store: limiter.store,
          rules: { r: { algorithm, windows: [{ limit: 10, period: '10s' }] } },
        })
        await fill.consume('r', 'ip:a', { cost: 6 })
        await fill.consume('r', 'user:1', { cost: 10 })
        const limited = await limiter.consume('r', ['ip:a', 'user:1'])
        expect(limited).toMatchObject({ allowed: false, reason: 'limited' })
        expect(limited.windows.map((w) => [w.identifier, w.failed])).toEqual([
          ['ip:a', false],
          ['user:1', true],
        ])
        await limiter.close()
      })

      it('lets a shed decision through in dry run, reason dry-run, naming the window and charging nothing', async () => {
        const { limiter } = limiterFor(
          {
            r: {
              algorithm,
              windows: [
                { limit: 10, period: '10s', lowBurst: 4 },
                { limit: 20, period: '1m' },
              ],
              dryRun: true,
            },
          },
          () => 0,
        )
        for (let i = 0; i < 4; i++) await limiter.consume('r', 'ip:a')
        const before = await harnessOf().snapshot()
        expect(Object.keys(before)).not.toHaveLength(0)
        const decision: Decision = await limiter.consume('r', 'ip:a')
        expect(decision).toMatchObject({ allowed: true, reason: 'dry-run', retryAfterMs: 0 })
        expect(decision.windows.map((w) => w.failed)).toEqual([true, false])
        expect(await harnessOf().snapshot()).toEqual(before)
        await limiter.close()
      })
    })

    it('draws no random number without lowBurst, and one per consume or peek with it anywhere in the chain', async () => {
      const rules = {
        plain: { windows: [{ limit: 10, period: '10s' }] },
        child: { windows: [{ limit: 10, period: '10s' }], parent: 'root' },
        root: { windows: [{ limit: 100, period: '1m', lowBurst: 50 }] },
      } satisfies RulesOptions
      const source = scripted(0.5)
      const { limiter } = limiterFor(rules, source.random)
      const ids = ['ip:a', 'user:1']
      await limiter.consume('plain', ids)
      await limiter.peek('plain', ids)
      await limiter.refund('plain', ids)
      await limiter.reset('plain', ids)
      expect(source.calls).toBe(0)
      await limiter.consume('child', ids, { cost: 2 })
      expect(source.calls).toBe(1)
      await limiter.peek('child', ids)
      expect(source.calls).toBe(2)
      await limiter.refund('child', ids)
      await limiter.reset('child', ids, { parents: true })
      expect(source.calls).toBe(2)
      await limiter.close()
    })

    // Consumes that charge and refunds that give the charge back keep the use at 75 before each
    // request: a request of 1 leaves 76 of 100, shedding from 20, p = 56 / 80 = 0.7.
    it('refuses 70% ± 2% of 10,000 consumes at a use of 76, each admitted one refunded', async () => {
      const rules = { r: { windows: [{ limit: 100, period: '10s', lowBurst: 20 }] } } satisfies RulesOptions
      const { limiter, store } = limiterFor(rules, seededUniform(31))
      await createLimiter({
        store,
        rules: withAlgorithm({ r: { windows: [{ limit: 100, period: '10s' }] } }, fallback),
      }).consume('r', 'ip:a', {
        cost: 75,
      })
      let shed = 0
      for (let i = 0; i < 10_000; i++) {
        const d = await limiter.consume('r', 'ip:a')
        if (d.reason === 'shed') shed++
        else {
          expect(d.reason).toBe('ok')
          await limiter.refund('r', 'ip:a')
        }
      }
      expect(Math.abs(shed / 10_000 - 0.7)).toBeLessThanOrEqual(0.02)
      expect((await limiter.peek('r', 'ip:a', { cost: 0 })).windows[0]?.remaining).toBe(25)
      await limiter.close()
    })
  })
}
