import { createLimiter, HybridStore, type Limiter, type RulesOptions } from '@tollgate/core'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { decodeCounterState } from '../../packages/core/src/stores/shared/redis-state.js'
import { ManualClock } from '../src/manual-clock.js'

// Strict mode's two invariants under any interleaving of grants, decisions, refunds, returns and
// window ends, on a real Redis: no window admits more than its limit, and units are conserved:
// once every process has synced, Redis counts in the current window exactly the units admitted
// in it (refunds taken off) plus the slices the processes hold.
const L = 10
const PERIOD = 1_000
const PROCESSES = 3
const T0 = 1_763_700_000_000 - (1_763_700_000_000 % PERIOD)
const rules = { r: { algorithm: 'fixed-window', windows: [{ limit: L, period: PERIOD }] } } satisfies RulesOptions
const WINDOW = { limit: L, periodMs: PERIOD }

type Step =
  | { kind: 'consume'; process: number; cost: number }
  | { kind: 'refund'; process: number }
  | { kind: 'sync'; process: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'check' }

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('consume' as const),
      process: fc.nat(PROCESSES - 1),
      cost: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('refund' as const), process: fc.nat(PROCESSES - 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('sync' as const), process: fc.nat(PROCESSES - 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 700 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'check' as const }) },
)

describe('HybridStore, strict mode: any interleaving', () => {
  let client: Redis
  let runs = 0
  beforeAll(() => {
    client = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 })
  })
  afterAll(async () => {
    await client.quit()
  })

  it('never admits above the limit in a window, and conserves units', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 3 }),
        async (steps, headroom) => {
          const clock = new ManualClock(T0)
          const prefix = `strictprop${runs++}:`
          const stores = Array.from(
            { length: PROCESSES },
            () =>
              new HybridStore({
                client,
                prefix,
                clock: clock.now,
                autoSync: false,
                consistency: 'strict',
                lease: { headroom },
                outage: { afterMs: Number.POSITIVE_INFINITY },
              }),
          )
          const limiters: Limiter[] = stores.map((store) => createLimiter({ store, rules, onWarning: () => {} }))
          const key = (stores[0] as HybridStore).keyOf({
            rule: (limiters[0] as Limiter).rules.get('r')!.stateName,
            algorithm: 'fixed-window',
            windows: [],
            identifier: 'ip:1',
          })
          // Units admitted (refunds taken off) per window, by the window's end.
          const admitted = new Map<number, number>()
          const windowEnd = () => clock.nowMs - (clock.nowMs % PERIOD) + PERIOD
          const heldBy = new Array<number>(PROCESSES).fill(0)

          // What Redis counts in the current window.
          async function countedNow(): Promise<number> {
            const [fields] = decodeCounterState('fixed-window', [WINDOW], await client.get(key))
            return fields?.endsAt === windowEnd() ? fields.count : 0
          }

          async function conserved(): Promise<void> {
            for (const store of stores) expect((await store.syncNow()).error).toBeUndefined()
            const end = windowEnd()
            const counted = await countedNow()
            const reserved = stores.reduce((sum, store) => sum + store.stats().reservedUnits, 0)
            expect(counted).toBe((admitted.get(end) ?? 0) + reserved)
          }

          for (const s of steps) {
            if (s.kind === 'consume') {
              const decision = await (limiters[s.process] as Limiter).consume('r', 'ip:1', { cost: s.cost })
              if (decision.allowed) {
                const end = windowEnd()
                admitted.set(end, (admitted.get(end) ?? 0) + s.cost)
                heldBy[s.process] = (heldBy[s.process] as number) + s.cost
                expect(admitted.get(end)).toBeLessThanOrEqual(L)
              }
            } else if (s.kind === 'refund') {
              // Only what this process admitted in this window, as a caller refunds its own request.
              const end = windowEnd()
              if ((heldBy[s.process] as number) > 0 && (admitted.get(end) ?? 0) > 0) {
                await (limiters[s.process] as Limiter).refund('r', 'ip:1')
                heldBy[s.process] = (heldBy[s.process] as number) - 1
                admitted.set(end, (admitted.get(end) as number) - 1)
              }
            } else if (s.kind === 'sync') {
              expect((await (stores[s.process] as HybridStore).syncNow()).error).toBeUndefined()
            } else if (s.kind === 'advance') {
              const before = windowEnd()
              clock.advance(s.ms)
              if (windowEnd() !== before) heldBy.fill(0)
            } else {
              await conserved()
            }
          }
          await conserved()
          await Promise.all(limiters.map((limiter) => limiter.close()))
          // Closed, every slice is back: Redis counts what was admitted.
          expect(await countedNow()).toBe(admitted.get(windowEnd()) ?? 0)
        },
      ),
      { numRuns: 150, seed: 20261123 },
    )
  }, 120_000)
})
