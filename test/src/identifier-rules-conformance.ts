import type { AlgorithmName, RulesOptions } from '@tollgate/core'
import { describe, expect, it } from 'vitest'
import { conformanceLimiter } from './conformance-limiter.js'
import type { StoreHarness } from './store-conformance.js'

/**
 * Rules keyed by identifier (`by`: each level of a hierarchy counting its own identifiers) and
 * their windows per identifier (`overrides`), as every store must decide them: run inside the
 * store conformance suite.
 */
export function describeIdentifierRules(
  harnessOf: () => StoreHarness,
  /** What rules that name no algorithm take, on a store without the sliding log. */
  fallback?: AlgorithmName,
): void {
  const limiterFor = (given: RulesOptions) => conformanceLimiter(harnessOf(), given, fallback)

  describe('by: each level of a hierarchy keyed by its own identifier', () => {
    const hierarchy = {
      user: { windows: [{ limit: 3, period: '1m' }], by: ['user'], parent: 'org' },
      org: { windows: [{ limit: 5, period: '1m' }], by: ['org'], parent: 'global' },
      global: { windows: [{ limit: 7, period: '1m' }], by: [] },
    } satisfies RulesOptions

    it('holds a user to 3, an organisation to 5 and everyone to 7, a refusal charging nothing anywhere', async () => {
      const { limiter } = limiterFor(hierarchy)
      const refusedBy = async (ids: string[]) => {
        const decision = await limiter.consume('user', ids)
        if (decision.allowed) return 'allowed'
        const failed = decision.windows.filter((w) => w.failed)
        return failed.map((w) => `${w.rule}/${w.identifier}`).join(' ')
      }
      const a = ['user:a', 'org:acme']
      expect([await refusedBy(a), await refusedBy(a), await refusedBy(a), await refusedBy(a)]).toEqual([
        'allowed',
        'allowed',
        'allowed',
        'user/user:a',
      ])
      const b = ['user:b', 'org:acme']
      expect([await refusedBy(b), await refusedBy(b), await refusedBy(b)]).toEqual([
        'allowed',
        'allowed',
        'org/org:acme',
      ])
      const c = ['user:c', 'org:beta']
      expect([await refusedBy(c), await refusedBy(c), await refusedBy(c)]).toEqual(['allowed', 'allowed', 'global/*'])
      // The refusals charged nothing: what each level counts is what was admitted.
      const peek = await limiter.peek('user', ['user:d', 'org:beta'])
      expect(peek.windows.map((w) => [w.rule, w.identifier, w.remaining])).toEqual([
        ['user', 'user:d', 3],
        ['org', 'org:beta', 3],
        ['global', '*', 0],
      ])
      expect((await limiter.peek('org', 'org:acme')).windows.map((w) => [w.rule, w.remaining])).toEqual([
        ['org', 0],
        ['global', 0],
      ])
      await limiter.close()
    })

    it('charges a rule without by on every identifier given, beside parents that pick theirs', async () => {
      const { limiter } = limiterFor({
        route: { windows: [{ limit: 2, period: '1m' }], parent: 'tenant' },
        tenant: { windows: [{ limit: 3, period: '1m' }], by: ['org'] },
      })
      const first = await limiter.consume('route', ['ip:203.0.113.7', 'user:1', 'org:acme'])
      expect(first.windows.map((w) => `${w.rule}/${w.identifier}`)).toEqual([
        'route/ip:203.0.113.7',
        'route/user:1',
        'route/org:acme',
        'tenant/org:acme',
      ])
      await limiter.consume('route', ['ip:203.0.113.8', 'user:2', 'org:acme'])
      const third = await limiter.consume('route', ['ip:203.0.113.9', 'user:3', 'org:acme'])
      // route/org:acme counts the organisation too, as any identifier of a rule without by.
      expect(third.allowed).toBe(false)
      expect(third.windows.filter((w) => w.failed).map((w) => `${w.rule}/${w.identifier}`)).toEqual(['route/org:acme'])
      await limiter.close()
    })

    it('refuses a decision that gives a rule none of its kinds, before the store is asked', async () => {
      const { limiter } = limiterFor(hierarchy)
      await expect(limiter.consume('user', ['user:a'])).rejects.toMatchObject({
        code: 'TG_INVALID_ARGUMENT',
        message: expect.stringContaining("rule 'org' is charged on identifiers of kind 'org'"),
      })
      expect((await limiter.peek('user', ['user:a', 'org:acme'])).windows.every((w) => w.remaining > 0)).toBe(true)
      await limiter.close()
    })

    it('resets a level alone, or the whole chain with { parents: true }', async () => {
      const { limiter } = limiterFor(hierarchy)
      const ids = ['user:a', 'org:acme']
      await limiter.consume('user', ids, { cost: 3 })
      await limiter.reset('user', ids)
      expect((await limiter.peek('user', ids)).windows.map((w) => w.remaining)).toEqual([3, 2, 4])
      await limiter.reset('user', ids, { parents: true })
      expect((await limiter.peek('user', ids)).windows.map((w) => w.remaining)).toEqual([3, 5, 7])
      await limiter.close()
    })

    it('gives back with refund where consume charged', async () => {
      const { limiter } = limiterFor(hierarchy)
      const ids = ['user:a', 'org:acme']
      await limiter.consume('user', ids, { cost: 2 })
      await limiter.refund('user', ids)
      expect((await limiter.peek('user', ids)).windows.map((w) => w.remaining)).toEqual([2, 4, 6])
      await limiter.close()
    })
  })

  describe('overrides: windows per identifier', () => {
    const rules = {
      api: {
        windows: [{ limit: 2, period: '1m' }],
        overrides: {
          'org:acme': { windows: [{ limit: 10, period: '1m' }] },
          'org:*-test': { windows: [{ limit: 1, period: '1m' }] },
          'org:*': { windows: [{ limit: 3, period: '1m' }] },
        },
      },
    } satisfies RulesOptions

    it('gives an exact identifier its windows over any pattern, the most specific pattern over the rest', async () => {
      const { limiter } = limiterFor(rules)
      const admitted = async (id: string, times: number) => {
        let count = 0
        for (let i = 0; i < times; i++) if ((await limiter.consume('api', id)).allowed) count++
        return count
      }
      expect(await admitted('org:acme', 12)).toBe(10)
      expect(await admitted('org:shop-test', 4)).toBe(1)
      expect(await admitted('org:beta', 5)).toBe(3)
      expect(await admitted('user:1', 5)).toBe(2)
      const refused = await limiter.consume('api', 'org:acme')
      expect(refused.windows.map((w) => [w.limit, w.remaining, w.failed])).toEqual([[10, 0, true]])
      await limiter.close()
    })

    it('applies each identifier its own windows in one decision, all or nothing', async () => {
      const { limiter } = limiterFor(rules)
      await limiter.consume('api', 'user:1', { cost: 2 })
      const both = await limiter.consume('api', ['org:acme', 'user:1'])
      expect(both.allowed).toBe(false)
      expect(both.windows.map((w) => [w.identifier, w.limit, w.remaining, w.failed])).toEqual([
        ['org:acme', 10, 10, false],
        ['user:1', 2, 0, true],
      ])
      expect((await limiter.peek('api', 'org:acme')).windows[0]?.remaining).toBe(10)
      await limiter.close()
    })
  })
}
