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
  slidingLogMember,
  toSlidingLogModel,
} from '../src/redis-codec.js'
import { seededRandom } from '../src/seeded-random.js'

const MINUTE: Window = { limit: 100, periodMs: 60_000 }
const HOUR: Window = { limit: 1_000, periodMs: 3_600_000 }
const LARGE: Window = { limit: 2_000_000_000, periodMs: 4_000_000 }

describe('redis-state: counter values', () => {
  // The values redis-compact-state.test.ts finds in Redis after one hit at 1763700059710.
  it.each([
    ['fixed-window', { endsAt: 1_763_700_060_000, count: 1 }, '-1763700060000001'],
    [
      'sliding-window',
      { expiresAt: 1_763_700_120_000, count: 1, previous: 0 },
      '1763700120000' + '1' + '0' + '1' + '1',
    ],
    ['token-bucket', { measuredAt: 1_763_700_059_710, deficit: 600 }, '1763700059710' + '600' + '3'],
    ['gcra', { measuredAt: 1_763_700_059_710, deficit: 600 }, '1763700059710' + '600' + '3'],
  ] as const)('%s: one window encodes compact, and decodes back', (algorithm, fields, value) => {
    expect(encodeCounterState(algorithm, [MINUTE], [fields])).toBe(value)
    expect(decodeCounterState(algorithm, [MINUTE], value)).toEqual([fields])
  })

  it('writes a time of whole seconds and a count below 1,000,000 addable, and the rest compact', () => {
    const below = { endsAt: 1_763_704_000_000, count: 999_999 }
    expect(encodeCounterState('fixed-window', [LARGE], [below])).toBe('-1763704000999999')
    expect(decodeCounterState('fixed-window', [LARGE], '-1763704000999999')).toEqual([below])
    const at = { endsAt: 1_763_704_000_000, count: 1_000_000 }
    expect(encodeCounterState('fixed-window', [LARGE], [at])).toBe('1763704000000' + '1000000' + '7')
    const late = { endsAt: 1_763_704_000_500, count: 3 }
    expect(encodeCounterState('fixed-window', [LARGE], [late])).toBe('1763704000500' + '3' + '1')
    // A count of 0 at the first second after the epoch: the least magnitude the form holds.
    expect(decodeCounterState('fixed-window', [LARGE], '-1000000')).toEqual([{ endsAt: 1_000, count: 0 }])
  })

  it('packs a count of 9 digits, and writes a 10-digit one as text', () => {
    const nine = { endsAt: 1_763_704_000_000, count: 999_999_999 }
    // 23 digits: more than Redis keeps as an integer, still compact and read piece by piece.
    expect(encodeCounterState('fixed-window', [LARGE], [nine])).toBe('1763704000000' + '999999999' + '9')
    expect(decodeCounterState('fixed-window', [LARGE], '1763704000000' + '999999999' + '9')).toEqual([nine])
    const ten = { endsAt: 1_763_704_000_000, count: 1_000_000_000 }
    expect(encodeCounterState('fixed-window', [LARGE], [ten])).toBe('4000000:1763704000000:1000000000 ')
    expect(decodeCounterState('fixed-window', [LARGE], '4000000:1763704000000:1000000000 ')).toEqual([ten])
  })

  it('writes several windows as text, one entry per window that has fields, in the rule’s order', () => {
    const state = [undefined, { expiresAt: 1_763_704_800_000, count: 0, previous: 9_007_199_254_740_991 }]
    const value = encodeCounterState('sliding-window', [MINUTE, HOUR], state)
    expect(value).toBe('3600000:1763704800000:0:9007199254740991 ')
    expect(decodeCounterState('sliding-window', [MINUTE, HOUR], value as string)).toEqual(state)
    expect(encodeCounterState('sliding-window', [MINUTE, HOUR], [undefined, undefined])).toBeUndefined()
  })

  it('matches text entries to windows by period, and gives a compact value to the first window', () => {
    const text = '60000:1763700060000:3 5000:1763700005000:9 3600000:1763701200000:7 '
    expect(decodeCounterState('fixed-window', [HOUR, MINUTE], text)).toEqual([
      { endsAt: 1_763_701_200_000, count: 7 },
      { endsAt: 1_763_700_060_000, count: 3 },
    ])
    expect(decodeCounterState('fixed-window', [HOUR, MINUTE], '17637000600003' + '1')).toEqual([
      { endsAt: 1_763_700_060_000, count: 3 },
      undefined,
    ])
    expect(decodeCounterState('fixed-window', [HOUR], null)).toEqual([undefined])
  })

  it("reads 0.1.0's text layout, whose fields were the models' own", () => {
    expect(decodeCounterState('fixed-window', [MINUTE, HOUR], '60000 29395000 3 3600000 489916 7')).toEqual([
      { endsAt: 29_395_001 * 60_000, count: 3 },
      { endsAt: 489_917 * 3_600_000, count: 7 },
    ])
    // A current count of 0 leaves the state counting only until its own window's end.
    expect(decodeCounterState('sliding-window', [MINUTE], '60000 29395000 0 12')).toEqual([
      { expiresAt: 29_395_001 * 60_000, count: 0, previous: 12 },
    ])
    // 100 per minute: a token is 600 units, a full bucket 60,000; a level past it is full.
    expect(decodeCounterState('token-bucket', [MINUTE], '60000 59400 1763700000000')).toEqual([
      { measuredAt: 1_763_700_000_000, deficit: 600 },
    ])
    expect(decodeCounterState('gcra', [MINUTE], '60000 70000 1763700000000')).toEqual([
      { measuredAt: 1_763_700_000_000, deficit: 0 },
    ])
  })

  it('converts to the models’ state and back', () => {
    const windows = [MINUTE, HOUR]
    const fixed = [
      { endsAt: 29_395_001 * 60_000, count: 3 },
      { endsAt: 489_917 * 3_600_000, count: 7 },
    ]
    expect(toModelState('fixed-window', windows, fixed)).toEqual([60_000, 29_395_000, 3, 3_600_000, 489_916, 7])
    expect(fromModelState('fixed-window', windows, [60_000, 29_395_000, 3, 3_600_000, 489_916, 7])).toEqual(fixed)
    const sliding = [{ expiresAt: 29_395_002 * 60_000, count: 4, previous: 2 }, undefined]
    expect(toModelState('sliding-window', windows, sliding)).toEqual([60_000, 29_395_000, 4, 2])
    expect(fromModelState('sliding-window', windows, [60_000, 29_395_000, 4, 2])).toEqual(sliding)
    const bucket = [{ measuredAt: 1_763_700_000_000, deficit: 600 }]
    expect(toModelState('gcra', [MINUTE], bucket)).toEqual([60_000, 59_400, 1_763_700_000_000])
    expect(fromModelState('gcra', [MINUTE], [60_000, 59_400, 1_763_700_000_000])).toEqual(bucket)
    expect(toModelState('gcra', [MINUTE], [undefined])).toBeUndefined()
  })

  it('expires a key when its last window has nothing left to count', () => {
    expect(counterExpiresAt('fixed-window', [MINUTE], [{ endsAt: 1_763_700_060_000, count: 1 }])).toBe(
      1_763_700_060_000,
    )
    expect(counterExpiresAt('fixed-window', [MINUTE], [{ endsAt: 1_763_700_060_000, count: 0 }])).toBe(0)
    // 600 units refill at 1 a millisecond.
    expect(counterExpiresAt('token-bucket', [MINUTE], [{ measuredAt: 1_763_700_000_000, deficit: 600 }])).toBe(
      1_763_700_000_600,
    )
  })
})

describe('redis-state: sliding-log entries', () => {
  it('packs each running total into 7 big-endian bytes, up to 2^53 − 1', () => {
    expect(slidingLogMember(9_007_199_254_740_991).toString('hex')).toBe('1fffffffffffff')
    expect(slidingLogMember(1).toString('hex')).toBe('00000000000001')
    const entries = [
      { at: 1_763_700_000_000, total: 5 },
      { at: 1_763_700_000_000, total: 9_007_199_254_740_991 },
    ]
    const zadd = encodeSlidingLog(entries)
    expect(zadd[0]).toBe(1_763_700_000_000)
    // ZRANGE … WITHSCORES as buffers: member, score, member, score.
    const read = [zadd[1] as Buffer, Buffer.from('1763700000000'), zadd[3] as Buffer, Buffer.from('1763700000000')]
    expect(decodeSlidingLog(read)).toEqual(entries)
    expect(() => decodeSlidingLog([Buffer.from('12'), Buffer.from('1')])).toThrow(/not a sliding-log member/)
  })
})

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
