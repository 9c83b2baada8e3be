import { ALGORITHMS, type AlgorithmName, createLimiter, HybridStore, RedisStore, type Store } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'

const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 3_600_000)
const COUNTERS = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const satisfies AlgorithmName[]
let prefixes = 0

// A rolling deploy that changed a rule's period in code under the same name (5 per second → 5 per
// hour) let the processes still on the old period end the new window at theirs: user:1 got 30
// admitted in 6 s on RedisStore, 14 on HybridStore, where the new rule allows 5 per hour.
describe('a rule whose period changed in code, during a rolling deploy', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  const cases: Array<[string, AlgorithmName, (clock: ManualClock, prefix: string) => Store]> = [
    ...ALGORITHMS.map(
      (algorithm) =>
        [
          `RedisStore, ${algorithm}`,
          algorithm,
          (clock: ManualClock, prefix: string) => new RedisStore({ client, clock: clock.now, prefix }),
        ] as [string, AlgorithmName, (clock: ManualClock, prefix: string) => Store],
    ),
    ...COUNTERS.map(
      (algorithm) =>
        [
          `HybridStore, ${algorithm}`,
          algorithm,
          (clock: ManualClock, prefix: string) =>
            new HybridStore({ client, clock: clock.now, prefix, autoSync: false, onWarning: () => {} }),
        ] as [string, AlgorithmName, (clock: ManualClock, prefix: string) => Store],
    ),
  ]

  it.each(cases)(
    '%s: the processes on the new period admit their limit once, whatever the old ones do',
    async (_, algorithm, storeOf) => {
      const clock = new ManualClock(T0)
      const prefix = `deploy${prefixes++}:`
      const oldStore = storeOf(clock, prefix)
      const newStore = storeOf(clock, prefix)
      const old = createLimiter({
        store: oldStore,
        rules: { api: { algorithm, windows: [{ limit: 5, period: '1s' }] } },
      })
      const next = createLimiter({
        store: newStore,
        rules: { api: { algorithm, windows: [{ limit: 5, period: '1h' }] } },
      })
      const sync = async () => {
        for (const store of [oldStore, newStore]) if (store instanceof HybridStore) await store.syncNow()
      }
      let admittedByNew = 0
      // 6 s, a request to each process every 100 ms, and the hybrid stores syncing every second.
      for (let tick = 0; tick < 60; tick++) {
        await old.consume('api', 'user:1')
        if ((await next.consume('api', 'user:1')).allowed) admittedByNew++
        clock.advance(100)
        if (tick % 10 === 9) await sync()
      }
      expect(admittedByNew).toBe(5)
      await Promise.all([old.close(), next.close()])
    },
  )
})
