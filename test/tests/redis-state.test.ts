import {
  ALGORITHMS,
  type AlgorithmName,
  RedisStore,
  type StoreOperation,
  type StoreResult,
  type StoreTarget,
  type Window,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { algorithms } from '../../packages/core/src/algorithms/index.js'
import { evaluateLocally, type StateTable } from '../../packages/core/src/stores/shared/evaluate-locally.js'
import {
  type CounterAlgorithm,
  decodeCounterState,
  toModelState,
} from '../../packages/core/src/stores/shared/redis-state.js'
import { ManualClock } from '../src/manual-clock.js'
import {
  counterExpiresAt,
  decodeSlidingLog,
  encodeCounterState,
  encodeSlidingLog,
  fromModelState,
  type SlidingLogEntry,
  slidingLogExpiresAt,
  toSlidingLogModel,
} from '../src/redis-codec.js'
import { seededRandom } from '../src/seeded-random.js'

const DAY = 86_400_000
const MAX = Number.MAX_SAFE_INTEGER

interface Shape {
  name: string
  windows: Window[]
  /** A cost in units of the first window's limit, so that large quotas take large charges. */
  unit: number
}

const SHAPES: Shape[] = [
  { name: 'one window', windows: [{ limit: 100, periodMs: 60_000 }], unit: 1 },
  {
    name: 'two windows',
    windows: [
      { limit: 100, periodMs: 60_000 },
      { limit: 1_000, periodMs: 3_600_000 },
    ],
    unit: 1,
  },
  // Counts around 999,999,999, the most a compact value holds after its first field.
  { name: 'the compact/text boundary', windows: [{ limit: 2_000_000_000, periodMs: 4_000_000 }], unit: 333_333_333 },
  { name: '2^53 − 1 per 366 days', windows: [{ limit: MAX, periodMs: 366 * DAY }], unit: 2 ** 50 },
  {
    name: '2^53 − 1 per 366 days and 10^11 per 30 days',
    windows: [
      { limit: MAX, periodMs: 366 * DAY },
      { limit: 1e11, periodMs: 30 * DAY },
    ],
    unit: 7_777_777_777,
  },
]

const COUNTERS = ALGORITHMS.filter((algorithm): algorithm is CounterAlgorithm => algorithm !== 'sliding-log')

/** A StateTable like MemoryStore's, whose states the test can read and seed. */
class ModelTable implements StateTable {
  readonly entries = new Map<string, { state: unknown; expiresAt: number }>()

  get(key: string, now: number): unknown {
    const entry = this.entries.get(key)
    return entry !== undefined && entry.expiresAt > now ? entry.state : undefined
  }

  set(key: string, state: unknown, expiresAt: number): void {
    this.entries.set(key, { state, expiresAt })
  }

  delete(key: string): void {
    this.entries.delete(key)
  }

  /** Milliseconds the state has left at `now`, 0 if none. */
  left(key: string, now: number): number {
    const entry = this.entries.get(key)
    return entry === undefined ? 0 : Math.max(0, entry.expiresAt - now)
  }
}

/** What the TypeScript model answers for this state, as a StoreResult's windows. */
function answersOf(algorithm: AlgorithmName, state: unknown, windows: readonly Window[], now: number, cost: number) {
  const model = algorithms[algorithm]
  return windows.map((window) => model.answer(state, window, now, cost))
}

describe('the Redis state decoder reads what the decide script writes', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  function storeFor(clock: ManualClock, prefix: string): RedisStore {
    // The script's answers are the subject: none is held in the process.
    return new RedisStore({ client, clock: clock.now, prefix: `state:${process.pid}:${prefix}:`, refusalCache: false })
  }

  async function storedLog(key: string): Promise<SlidingLogEntry[]> {
    return decodeSlidingLog(await client.zrangeBuffer(key, 0, -1, 'WITHSCORES'))
  }

  async function storedCounter(algorithm: CounterAlgorithm, key: string, windows: readonly Window[]) {
    const value = await client.get(key)
    return { value, fields: decodeCounterState(algorithm, windows, value) }
  }

  /** The key's state, decoded, as the TypeScript model holds it. */
  async function storedModel(algorithm: AlgorithmName, key: string, windows: readonly Window[]): Promise<unknown> {
    if (algorithm === 'sliding-log') return toSlidingLogModel(await storedLog(key))
    return toModelState(algorithm, windows, (await storedCounter(algorithm, key, windows)).fields)
  }

  describe.each(SHAPES)('$name', (shape) => {
    it.each(ALGORITHMS)('%s: every state written decodes to what the decisions say', async (algorithm) => {
      const clock = new ManualClock(1_763_700_000_000)
      const store = storeFor(clock, `written:${algorithm}:${SHAPES.indexOf(shape)}`)
      const target: StoreTarget = { rule: 'r', algorithm, windows: shape.windows, identifier: 'ip:a' }
      const key = store.keyOf(target)
      const table = new ModelTable()
      const random = seededRandom(ALGORITHMS.indexOf(algorithm) * 31 + SHAPES.indexOf(shape))
      const period = (shape.windows[0] as Window).periodMs
      let compared = 0
      const forms = new Set<string>()
      for (let step = 0; step < 150; step++) {
        // Never within the last tenth of a window: a key that Redis expires in real time while
        // the test's clock stands still would be an artefact of the test.
        clock.advance(random(8) === 0 ? period : 1 + random(Math.max(1, Math.floor(period / 400))))
        if (clock.nowMs % period > period * 0.9) clock.advance(period - (clock.nowMs % period) + 1)
        const operation = (['consume', 'consume', 'consume', 'peek', 'refund'] as const)[random(5)] as StoreOperation
        const cost = Math.min(MAX, (1 + random(3)) * shape.unit)
        const request = { operation, targets: [target], cost }
        const fromRedis = await store.evaluate(request)
        const fromModel = evaluateLocally(table, [key], request, clock.nowMs)
        const what = `step ${step}: ${operation} ${cost}`
        expect(plain(fromRedis), what).toEqual(fromModel)

        // The decoded state answers as the decision did (a key Redis still holds past the end
        // of its state, which this test's clock outruns, answers as no state)...
        const model = await storedModel(algorithm, key, shape.windows)
        expect(answersOf(algorithm, model, shape.windows, clock.nowMs, cost), what).toEqual(fromRedis.windows)
        if (algorithm === 'sliding-log') continue
        // ...encodes back to the very value read...
        const { value, fields } = await storedCounter(algorithm, key, shape.windows)
        expect(encodeCounterState(algorithm, shape.windows, fields) ?? null, what).toBe(value)
        if (value !== null) forms.add(value.includes(' ') ? 'text' : 'compact')
        // ...and, while the model still holds a state, holds exactly its fields.
        if (table.left(key, clock.nowMs) === 0) continue
        compared++
        const modelState = table.get(key, clock.nowMs) as number[] | undefined
        expect(fields, what).toEqual(fromModelState(algorithm, shape.windows, modelState))
      }
      if (algorithm === 'sliding-log') return
      expect(compared).toBeGreaterThan(50)
      if (shape.name === 'the compact/text boundary' && algorithm === 'fixed-window') {
        expect([...forms].sort()).toEqual(['compact', 'text'])
      }
      if (shape.windows.length > 1) expect([...forms]).toEqual(['text'])
    })

    it.each(ALGORITHMS)('%s: a state written with SET decides as the one the script wrote', async (algorithm) => {
      const clock = new ManualClock(1_763_700_000_000)
      const store = storeFor(clock, `set:${algorithm}:${SHAPES.indexOf(shape)}`)
      const written: StoreTarget = { rule: 'r', algorithm, windows: shape.windows, identifier: 'ip:written' }
      const copied: StoreTarget = { ...written, identifier: 'ip:copied' }
      const [writtenKey, copiedKey] = [store.keyOf(written), store.keyOf(copied)]
      const random = seededRandom(1000 + ALGORITHMS.indexOf(algorithm) * 31 + SHAPES.indexOf(shape))
      const period = (shape.windows[0] as Window).periodMs
      for (let round = 0; round < 12; round++) {
        clock.advance(1 + random(Math.max(1, Math.floor(period / 200))))
        if (clock.nowMs % period > period * 0.9) clock.advance(period - (clock.nowMs % period) + 1)
        const cost = Math.min(MAX, (1 + random(3)) * shape.unit)
        await store.evaluate({ operation: 'consume', targets: [written], cost })
        // The copy: decoded from the written key, encoded again, and written with SET as a
        // client of Redis would write it, with the TTL the script would set.
        await client.del(copiedKey)
        if (algorithm === 'sliding-log') {
          const entries = await storedLog(writtenKey)
          if (entries.length > 0) {
            await client.zadd(copiedKey, ...(encodeSlidingLog(entries) as Array<number | Buffer>))
            await client.pexpire(copiedKey, slidingLogExpiresAt(entries, shape.windows) - clock.nowMs)
          }
        } else {
          const { fields } = await storedCounter(algorithm, writtenKey, shape.windows)
          const value = encodeCounterState(algorithm, shape.windows, fields)
          const ttl = counterExpiresAt(algorithm, shape.windows, fields) - clock.nowMs
          if (value !== undefined && ttl > 0) await client.set(copiedKey, value, 'PX', ttl)
        }
        // The same next decisions on both keys: the same answers, and the same values after.
        for (const operation of ['peek', 'consume', 'refund', 'consume'] as const) {
          const next = Math.min(MAX, (1 + random(2)) * shape.unit)
          const what = `round ${round}: ${operation} ${next}`
          const [a, b] = await Promise.all([
            store.evaluate({ operation, targets: [written], cost: next }),
            store.evaluate({ operation, targets: [copied], cost: next }),
          ])
          expect(plain(b), what).toEqual(plain(a))
          const read = (key: string) =>
            algorithm === 'sliding-log' ? storedLog(key) : client.get(key).then((value) => value)
          const [afterA, afterB] = await Promise.all([read(writtenKey), read(copiedKey)])
          expect(afterB, what).toEqual(afterA)
        }
      }
    })
  })

  // Keys written by version 0.1.0, whose text form held other fields.
  describe("0.1.0's text layout", () => {
    const windows: Window[] = [
      { limit: 100, periodMs: 60_000 },
      { limit: 1_000, periodMs: 3_600_000 },
    ]
    const NOW = 1_763_700_030_000
    // Per window: fixed (index, count), sliding (index, count, previous), bucket (level, measured at).
    const LEGACY: Readonly<Record<CounterAlgorithm, string>> = {
      'fixed-window': `60000 ${Math.floor(NOW / 60_000)} 40 3600000 ${Math.floor(NOW / 3_600_000)} 400`,
      'sliding-window': `60000 ${Math.floor(NOW / 60_000)} 40 30 3600000 ${Math.floor(NOW / 3_600_000) - 1} 500 0`,
      // A minute's bucket holds 60,000 units (a token is 600), an hour's 3,600,000 (3,600).
      'token-bucket': `60000 24000 ${NOW - 1_000} 3600000 1800000 ${NOW - 2_000}`,
      gcra: `60000 24000 ${NOW - 1_000} 3600000 1800000 ${NOW - 2_000}`,
    }

    it.each(COUNTERS)(
      '%s: decoded, and decided on, in its own fields; written back in the new layout',
      async (algorithm) => {
        const clock = new ManualClock(NOW)
        const store = storeFor(clock, `legacy:${algorithm}`)
        const target: StoreTarget = { rule: 'r', algorithm, windows, identifier: 'ip:a' }
        const key = store.keyOf(target)
        const legacy = LEGACY[algorithm]
        await client.set(key, legacy, 'PX', 3_600_000)
        const fields = decodeCounterState(algorithm, windows, legacy)
        const table = new ModelTable()
        table.set(key, toModelState(algorithm, windows, fields), NOW + 3_600_000)
        // The model's state is 0.1.0's text fields themselves, after each period.
        expect(toModelState(algorithm, windows, fields)).toEqual(legacy.split(' ').map(Number))

        for (const [operation, cost] of [
          ['peek', 3],
          ['consume', 5],
          ['refund', 2],
          ['consume', 1],
        ] as const) {
          const request = { operation, targets: [target], cost }
          const fromRedis = await store.evaluate(request)
          expect(plain(fromRedis), `${operation} ${cost}`).toEqual(evaluateLocally(table, [key], request, NOW))
        }
        const value = await client.get(key)
        expect(value).toContain(':')
        expect(toModelState(algorithm, windows, decodeCounterState(algorithm, windows, value))).toEqual(
          table.get(key, NOW),
        )
      },
    )
  })
})

/** A result's answer, without what a charged result carries to take its charge back. */
function plain(result: StoreResult): StoreResult {
  return { allowed: result.allowed, nowMs: result.nowMs, windows: result.windows }
}
