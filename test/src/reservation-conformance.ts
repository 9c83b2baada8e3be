import { ALGORITHMS, type AlgorithmName, type RulesOptions } from '@tollgate/core'
import { describe, expect, it } from 'vitest'
import { conformanceLimiter } from './conformance-limiter.js'
import type { StoreHarness } from './store-conformance.js'

/**
 * Reservations (`limiter.reserve`: a cost settled once it is known), as every store that charges
 * over a limit must keep them, on each algorithm it runs: run inside the store conformance suite.
 * A store that does not charge over a limit refuses `reserve`.
 */
export function describeReservations(
  harnessOf: () => StoreHarness,
  algorithms: readonly AlgorithmName[] = ALGORITHMS,
): void {
  describe('reserve, settle and cancel', () => {
    function limiterFor(rules: RulesOptions) {
      const made = conformanceLimiter(harnessOf(), rules)
      return { ...made, charges: made.store.chargesOverLimits === true }
    }

    it('is refused by a store that does not charge over a limit, or kept by one that does', async () => {
      const { limiter, charges } = limiterFor({
        r: { algorithm: algorithms[0], windows: [{ limit: 10, period: '1m' }] },
      })
      if (charges) expect((await limiter.reserve('r', 'k', { cost: 3 })).decision.reason).toBe('ok')
      else
        await expect(limiter.reserve('r', 'k', { cost: 3 })).rejects.toThrow(
          /limiter.reserve needs a store that charges over a limit/,
        )
      await limiter.close()
    })

    describe.each(algorithms)('%s', (algorithm) => {
      const rules = { r: { algorithm, windows: [{ limit: 100, period: '1m' }] } } satisfies RulesOptions
      const remaining = async (limiter: ReturnType<typeof limiterFor>['limiter'], id: string) =>
        (await limiter.peek('r', id, { cost: 0 })).windows[0]?.remaining

      it('charges the actual cost in place of the estimate, below it or above', async () => {
        const { limiter, charges } = limiterFor(rules)
        if (!charges) return
        const under = await limiter.reserve('r', 'a', { cost: 40 })
        expect([under.decision.reason, await remaining(limiter, 'a')]).toEqual(['ok', 60])
        await under.settle(15)
        expect(await remaining(limiter, 'a')).toBe(85)
        const over = await limiter.reserve('r', 'b', { cost: 10 })
        await over.settle(70)
        expect(await remaining(limiter, 'b')).toBe(30)
        await limiter.close()
      })

      it('goes into debt above the limit: later requests wait it out, then pass', async () => {
        const { limiter, clock, charges } = limiterFor(rules)
        if (!charges) return
        const reservation = await limiter.reserve('r', 'a', { cost: 50 })
        await reservation.settle(180)
        const refused = await limiter.consume('r', 'a')
        expect([refused.allowed, refused.windows[0]?.remaining]).toEqual([false, 0])
        expect(refused.retryAfterMs).toBeGreaterThan(0)
        // A bucket 80 tokens in debt refills 81 of them (at 100 a minute) before a request of 1 fits.
        if (algorithm === 'token-bucket' || algorithm === 'gcra') expect(refused.retryAfterMs).toBe(48_600)
        clock.advance(refused.retryAfterMs - 1)
        expect((await limiter.consume('r', 'a')).allowed).toBe(false)
        clock.advance(1)
        expect((await limiter.consume('r', 'a')).allowed).toBe(true)
        await limiter.close()
      })

      it('gives the estimate back on cancel, and writes once whichever of settle and cancel comes first', async () => {
        const { limiter, charges } = limiterFor(rules)
        if (!charges) return
        const cancelled = await limiter.reserve('r', 'a', { cost: 30 })
        await cancelled.cancel()
        await cancelled.cancel()
        await cancelled.settle(90)
        expect(await remaining(limiter, 'a')).toBe(100)
        const settled = await limiter.reserve('r', 'b', { cost: 30 })
        await Promise.all([settled.settle(50), settled.settle(50), settled.cancel()])
        expect(await remaining(limiter, 'b')).toBe(50)
        await limiter.close()
      })

      it('settles nothing for a refused reservation, nor for one in dry run', async () => {
        const { limiter, charges } = limiterFor({
          ...rules,
          shadow: { algorithm, windows: [{ limit: 10, period: '1m' }], dryRun: true },
        })
        if (!charges) return
        await limiter.consume('r', 'a', { cost: 95 })
        const refused = await limiter.reserve('r', 'a', { cost: 10 })
        expect(refused.decision.allowed).toBe(false)
        await refused.settle(50)
        await refused.cancel()
        expect(await remaining(limiter, 'a')).toBe(5)
        const shadowed = await limiter.reserve('shadow', 'a', { cost: 20 })
        expect(shadowed.decision.reason).toBe('dry-run')
        await shadowed.settle(40)
        expect((await limiter.peek('shadow', 'a', { cost: 0 })).windows[0]?.remaining).toBe(10)
        await limiter.close()
      })
    })

    it('refuses an actual cost that is not a non-negative integer, writing nothing', async () => {
      const { limiter, charges } = limiterFor({
        r: { algorithm: algorithms[0], windows: [{ limit: 10, period: '1m' }] },
      })
      if (!charges) return
      const reservation = await limiter.reserve('r', 'a', { cost: 2 })
      await expect(reservation.settle(-1)).rejects.toMatchObject({
        code: 'TG_INVALID_ARGUMENT',
        message: 'settle: actualCost must be a non-negative integer, got -1',
      })
      await expect(reservation.settle(1.5)).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT' })
      // Still open: a bad call settles nothing.
      await reservation.settle(5)
      expect((await limiter.peek('r', 'a', { cost: 0 })).windows[0]?.remaining).toBe(5)
      await limiter.close()
    })
  })
}
