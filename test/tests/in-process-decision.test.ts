import {
  ALGORITHMS,
  createLimiter,
  type Decision,
  HybridStore,
  type Limiter,
  MemoryStore,
  type RuleOptions,
  type RulesOptions,
  type Store,
  type StoreRequest,
  type StoreResult,
  type StoreTarget,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'
import { seededRandom, seededUniform } from '../src/seeded-random.js'

/**
 * A MemoryStore reached only through the `Store` interface, as a store of the user's or of
 * another copy of core is: each decision goes as a request to `evaluateSync`, and the limiter
 * makes its Decision from the store's result. A MemoryStore itself makes its Decision in one pass.
 */
class RequestOnly implements Store {
  readonly holdsBlocks: boolean | undefined
  readonly chargesOverLimits: boolean | undefined
  constructor(private readonly inner: MemoryStore | HybridStore) {
    this.holdsBlocks = 'holdsBlocks' in inner ? inner.holdsBlocks : undefined
    this.chargesOverLimits = 'chargesOverLimits' in inner ? inner.chargesOverLimits : undefined
  }
  evaluate(request: StoreRequest): Promise<StoreResult> {
    return this.inner.evaluate(request)
  }
  evaluateSync(request: StoreRequest): StoreResult | undefined {
    return this.inner.evaluateSync(request)
  }
  reset(targets: readonly StoreTarget[]): Promise<void> {
    return this.inner.reset(targets)
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}

const IDENTIFIERS = ['ip:203.0.113.7', 'user:42', 'user:7', 'org:acme', 'org:globex', 'ip:198.51.100.1']

/** A rule by user or IP under one by org: parents, `by`, an override and shedding, for every store. */
function userRule(algorithm: (typeof ALGORITHMS)[number]): RuleOptions {
  return {
    algorithm,
    windows: [
      { limit: 6, period: '2s', lowBurst: 3 },
      { limit: 15, period: '20s' },
    ],
    by: ['user', 'ip'],
    parent: 'org',
    overrides: { 'user:7': { windows: [{ limit: 2, period: '3s' }] } },
  }
}

/**
 * `steps` random operations (consume, peek, refund; costs of 0 to 3; dry runs; one to three
 * identifiers beside an org's) made on each limiter in turn, the clock moved between them: every
 * answer must be the first limiter's. The count of each kind of answer, a rejection's as 'error'.
 */
async function decideAlike(
  limiters: readonly Limiter[],
  clock: ManualClock,
  seed: number,
  steps: number,
): Promise<Map<string, number>> {
  const random = seededRandom(seed)
  const outcomes = new Map<string, number>()
  for (let step = 0; step < steps; step++) {
    clock.advance(random(8) === 0 ? random(6_000) : random(150))
    const count = 1 + random(3)
    const identifiers = ['org:acme', ...Array.from({ length: count }, () => IDENTIFIERS[random(IDENTIFIERS.length)])]
    const unique = [...new Set(identifiers as string[])]
    const rule = random(4) === 0 ? 'org' : 'user'
    const options = { cost: random(5) === 0 ? random(4) : 1, dryRun: random(10) === 0 }
    const operation = (['consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(5)] as
      | 'consume'
      | 'peek'
      | 'refund'
    const answers: Array<Decision | string> = []
    for (const limiter of limiters) {
      answers.push(
        await limiter[operation](rule, unique, options).catch((error: Error) => `${error.name}: ${error.message}`),
      )
    }
    for (const answer of answers.slice(1))
      expect(answer, `step ${step}: ${operation} ${rule} ${unique.join(', ')}`).toEqual(answers[0])
    const outcome = typeof answers[0] === 'string' ? 'error' : (answers[0] as Decision).reason
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
  }
  return outcomes
}

describe("a MemoryStore's one-pass decision and the request path decide alike", () => {
  it.each(ALGORITHMS)(
    '%s: parents, by, overrides, blocks, shedding and dry runs over 3,000 operations',
    async (algorithm) => {
      const rules = {
        user: { ...userRule(algorithm), block: { for: '5s', after: 2 } },
        org: { algorithm, windows: [{ limit: 30, period: '10s' }], by: ['org'], parent: 'everyone' },
        everyone: { algorithm, windows: [{ limit: 200, period: '1m' }], by: [] },
      } satisfies RulesOptions
      const seed = ALGORITHMS.indexOf(algorithm) + 11
      const clock = new ManualClock(1_700_000_000_321)
      const onePass = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 })
      const requested = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 })
      const limiters = [onePass, new RequestOnly(requested)].map((store) =>
        createLimiter({ store, rules, random: seededUniform(seed), onWarning: () => {} }),
      )
      const outcomes = await decideAlike(limiters, clock, seed, 3_000)
      expect(onePass.ttls()).toEqual(requested.ttls())
      // The run reached every kind of answer, so each was compared.
      for (const reason of ['ok', 'limited', 'blocked', 'shed', 'dry-run', 'error'])
        expect(outcomes.get(reason)).toBeGreaterThan(0)
      await Promise.all(limiters.map((limiter) => limiter.close()))
    },
  )
})

describe("a HybridStore's one-pass decision and the request path decide alike", () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it.each(ALGORITHMS.filter((algorithm) => algorithm !== 'sliding-log'))(
    '%s: parents, by, overrides, shedding and dry runs over 2,000 operations, then a sync',
    async (algorithm) => {
      const rules = {
        user: userRule(algorithm),
        org: { algorithm, windows: [{ limit: 30, period: '10s' }], by: ['org'] },
      } satisfies RulesOptions
      const seed = ALGORITHMS.indexOf(algorithm) + 31
      const clock = new ManualClock(1_700_000_000_321)
      const hybridAt = (prefix: string) =>
        new HybridStore({ client, clock: clock.now, autoSync: false, prefix: `${prefix}:${process.pid}:${algorithm}:` })
      const onePass = hybridAt('one-pass')
      const requested = hybridAt('requested')
      const limiters = [onePass, new RequestOnly(requested)].map((store) =>
        createLimiter({ store, rules, random: seededUniform(seed), onWarning: () => {} }),
      )
      const outcomes = await decideAlike(limiters, clock, seed, 2_000)
      for (const reason of ['ok', 'limited', 'shed', 'dry-run', 'error'])
        expect(outcomes.get(reason)).toBeGreaterThan(0)
      // Both pushed the same units: the same keys hold the same counts in Redis.
      for (const store of [onePass, requested]) expect((await store.syncNow()).error).toBeUndefined()
      expect(onePass.stats().trackedKeys).toBe(requested.stats().trackedKeys)
      // The counters' keys: a process's own (its operation ids, the fleet's instances) differ by process.
      const keysOf = async (prefix: string) =>
        (await client.keys(`${prefix}:${process.pid}:${algorithm}:*`))
          .filter((key) => !key.includes(':!op:') && !key.endsWith(':hybrid:instances'))
          .sort()
      const values = async (keys: string[]) => (keys.length === 0 ? [] : await client.mget(keys))
      const onePassKeys = await keysOf('one-pass')
      const requestedKeys = await keysOf('requested')
      expect(onePassKeys.length).toBeGreaterThan(0)
      expect(onePassKeys.map((key) => key.slice('one-pass'.length))).toEqual(
        requestedKeys.map((key) => key.slice('requested'.length)),
      )
      expect(await values(onePassKeys)).toEqual(await values(requestedKeys))
      await Promise.all(limiters.map((limiter) => limiter.close()))
    },
  )
})
