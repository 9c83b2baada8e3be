import { ALGORITHMS, type AlgorithmName, createLimiter, type Decision, type RulesOptions } from '@tollgate/core'
import { describe, expect, it } from 'vitest'
import { CONFORMANCE_T0, conformanceStore, limiterOn } from './conformance-limiter.js'
import type { StoreHarness } from './store-conformance.js'

const failed = (decision: Decision) =>
  decision.windows.filter((w) => w.failed).map((w) => `${w.rule}/${w.identifier}/${w.periodMs}`)

/**
 * Lockouts (a rule's `block`), as every store that holds blocks must decide them, on each
 * algorithm the store runs: run inside the store conformance suite. A store without blocks
 * refuses such a rule at construction.
 */
export function describeLockouts(
  harnessOf: () => StoreHarness,
  algorithms: readonly AlgorithmName[] = ALGORITHMS,
): void {
  describe('block: lockout after refusals', () => {
    /** Undefined on a store that keeps no blocks: the first test holds it to refusing them. */
    function limiterFor(rules: RulesOptions) {
      const { store, clock } = conformanceStore(harnessOf())
      if (store.holdsBlocks !== true) return undefined
      return { limiter: limiterOn(store, rules), clock }
    }

    it('is refused at construction by a store that keeps no blocks, or kept by one that does', () => {
      const store = harnessOf().makeStore(() => CONFORMANCE_T0)
      const make = () =>
        createLimiter({
          store,
          rules: { login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }], block: { for: '1m' } } },
        })
      if (store.holdsBlocks === true) expect(() => make().close()).not.toThrow()
      else expect(() => make()).toThrow(/rule 'login': block cannot run on .+, which keeps no blocks/)
    })

    describe.each(algorithms)('%s', (algorithm) => {
      it('blocks at the first refusal for `for`, whatever the windows hold, charging nothing', async () => {
        const made = limiterFor({ login: { algorithm, windows: [{ limit: 3, period: '10s' }], block: { for: '1m' } } })
        if (made === undefined) return
        const { limiter, clock } = made
        for (let i = 0; i < 3; i++) expect((await limiter.consume('login', 'ip:1')).allowed).toBe(true)
        const refused = await limiter.consume('login', 'ip:1')
        expect([refused.allowed, refused.reason, refused.retryAfterMs, failed(refused)]).toEqual([
          false,
          'blocked',
          60_000,
          ['login/ip:1/10000'],
        ])
        // The windows have long room again; the block holds, for peek and consume alike.
        clock.advance(30_000)
        const peeked = await limiter.peek('login', 'ip:1')
        expect([peeked.reason, peeked.retryAfterMs, peeked.windows[0]?.remaining]).toEqual(['blocked', 30_000, 3])
        expect((await limiter.consume('login', 'ip:1')).reason).toBe('blocked')
        // Charged nothing while blocked: every unit is there when it ends; another identifier never was blocked.
        expect((await limiter.consume('login', 'ip:2')).allowed).toBe(true)
        clock.advance(30_000)
        const after = await limiter.consume('login', 'ip:1')
        expect([after.reason, after.windows[0]?.remaining]).toEqual(['ok', 2])
        await limiter.close()
      })
    })

    it('counts `after` refusals within the longest period before blocking, and not peeks', async () => {
      const made = limiterFor({
        login: {
          algorithm: 'fixed-window',
          windows: [
            { limit: 1, period: '10s' },
            { limit: 5, period: '1m' },
          ],
          block: { for: '5m', after: 3 },
        },
      })
      if (made === undefined) return
      const { limiter, clock } = made
      await limiter.consume('login', 'ip:1')
      expect((await limiter.consume('login', 'ip:1')).reason).toBe('limited')
      expect((await limiter.peek('login', 'ip:1')).reason).toBe('limited')
      expect((await limiter.consume('login', 'ip:1')).reason).toBe('limited')
      const third = await limiter.consume('login', 'ip:1')
      expect([third.reason, third.retryAfterMs, failed(third)]).toEqual(['blocked', 300_000, ['login/ip:1/10000']])
      // Refusals further apart than the longest period (1 minute) start counting again.
      const spaced = made.limiter
      await spaced.reset('login', 'ip:1')
      const reasons: string[] = []
      for (let i = 0; i < 3; i++) {
        await spaced.consume('login', 'ip:3')
        reasons.push((await spaced.consume('login', 'ip:3')).reason)
        clock.advance(61_000)
      }
      expect(reasons).toEqual(['limited', 'limited', 'limited'])
      await limiter.close()
    })

    it('lengthens each next block by factor while the last is remembered, up to max, and starts over once forgotten', async () => {
      const made = limiterFor({
        login: {
          algorithm: 'fixed-window',
          windows: [{ limit: 1, period: '1s' }],
          block: { for: '10s', factor: 2, max: '30s' },
        },
      })
      if (made === undefined) return
      const { limiter, clock } = made
      const lengths: number[] = []
      for (let i = 0; i < 4; i++) {
        await limiter.consume('login', 'ip:1')
        const refused = await limiter.consume('login', 'ip:1')
        expect(refused.reason).toBe('blocked')
        lengths.push(refused.retryAfterMs)
        clock.advance(refused.retryAfterMs)
      }
      expect(lengths).toEqual([10_000, 20_000, 30_000, 30_000])
      // Forgotten once as long as the last block has passed since it ended.
      clock.advance(30_000)
      await limiter.consume('login', 'ip:1')
      expect((await limiter.consume('login', 'ip:1')).retryAfterMs).toBe(10_000)
      await limiter.close()
    })

    it('admits exactly the limit of a burst far above it, blocks, and admits nothing more until the block ends', async () => {
      const made = limiterFor({
        login: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1m' }], block: { for: '10m', after: 5 } },
      })
      if (made === undefined) return
      const { limiter, clock } = made
      const burst = await Promise.all(Array.from({ length: 300 }, () => limiter.consume('login', 'ip:1')))
      const count = (reason: string) => burst.filter((decision) => decision.reason === reason).length
      expect([count('ok'), count('limited') + count('blocked')]).toEqual([10, 290])
      // Five refusals counted, then every one blocked (a refusal cache may have kept some out of the store).
      expect(count('limited')).toBeLessThanOrEqual(4)
      clock.advance(60_000)
      expect((await limiter.consume('login', 'ip:1')).reason).toBe('blocked')
      clock.advance(540_000)
      expect((await limiter.consume('login', 'ip:1')).reason).toBe('ok')
      await limiter.close()
    })

    it('is lifted by reset', async () => {
      const made = limiterFor({
        login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }], block: { for: '1h' } },
      })
      if (made === undefined) return
      const { limiter } = made
      await limiter.consume('login', 'ip:1')
      expect((await limiter.consume('login', 'ip:1')).reason).toBe('blocked')
      await limiter.reset('login', 'ip:1')
      expect((await limiter.consume('login', 'ip:1')).reason).toBe('ok')
      await limiter.close()
    })

    it("blocks a parent's identifier for every child, and a refused child charges the parent nothing", async () => {
      const made = limiterFor({
        user: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '1m' }], by: ['user'], parent: 'org' },
        org: {
          algorithm: 'fixed-window',
          windows: [{ limit: 3, period: '1m' }],
          by: ['org'],
          block: { for: '10m' },
        },
      })
      if (made === undefined) return
      const { limiter } = made
      await limiter.consume('user', ['user:a', 'org:acme'], { cost: 2 })
      expect((await limiter.consume('user', ['user:a', 'org:acme'])).reason).toBe('limited')
      await limiter.consume('user', ['user:b', 'org:acme'])
      const over = await limiter.consume('user', ['user:c', 'org:acme'])
      expect([over.reason, over.retryAfterMs, failed(over)]).toEqual(['blocked', 600_000, ['org/org:acme/60000']])
      const other = await limiter.consume('user', ['user:d', 'org:acme'])
      expect([other.reason, other.windows.map((w) => w.remaining)]).toEqual(['blocked', [2, 0]])
      expect((await limiter.consume('user', ['user:e', 'org:beta'])).reason).toBe('ok')
      await limiter.close()
    })

    it('neither blocks nor counts a decision in dry run', async () => {
      const made = limiterFor({
        login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }], block: { for: '1h' }, dryRun: true },
      })
      if (made === undefined) return
      const { limiter } = made
      await limiter.consume('login', 'ip:1')
      const reasons = []
      for (let i = 0; i < 3; i++) reasons.push((await limiter.consume('login', 'ip:1')).reason)
      expect(reasons).toEqual(['dry-run', 'dry-run', 'dry-run'])
      expect((await limiter.consume('login', 'ip:1', { dryRun: false })).reason).toBe('blocked')
      await limiter.close()
    })

    it('keeps a block no longer than it and its memory matter (a TTL on every key)', async () => {
      const made = limiterFor({
        login: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '10s' }], block: { for: '1m', after: 2 } },
      })
      if (made === undefined) return
      const { limiter } = made
      await limiter.consume('login', 'ip:1')
      await limiter.consume('login', 'ip:1')
      const counting = (await harnessOf().keys()).filter(({ key }) => key.endsWith(':block'))
      expect(counting).toHaveLength(1)
      // One refusal counted: kept for the longest period from the first.
      expect(counting[0]?.ttlMs).toBeGreaterThan(0)
      expect(counting[0]?.ttlMs).toBeLessThanOrEqual(10_000)
      await limiter.consume('login', 'ip:1')
      const blocked = (await harnessOf().keys()).filter(({ key }) => key.endsWith(':block'))
      // The block, then as long again remembered for the next one's factor.
      expect(blocked[0]?.ttlMs).toBeGreaterThan(60_000)
      expect(blocked[0]?.ttlMs).toBeLessThanOrEqual(120_000)
      await limiter.close()
    })
  })
}
