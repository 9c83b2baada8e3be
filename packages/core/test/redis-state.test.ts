import { describe, expect, it } from 'vitest'
import {
  counterExpiresAt,
  decodeSlidingLog,
  encodeCounterState,
  encodeSlidingLog,
  fromModelState,
  slidingLogMember,
} from '../../../test/src/redis-codec.js'
import type { Window } from '../src/rules/rules.js'
import { decodeCounterState, toModelState } from '../src/stores/shared/redis-state.js'

const MINUTE: Window = { limit: 100, periodMs: 60_000 }
const HOUR: Window = { limit: 1_000, periodMs: 3_600_000 }
const LARGE: Window = { limit: 2_000_000_000, periodMs: 4_000_000 }

describe('redis-state: counter values', () => {
  // The values redis-compact-state.test.ts finds in Redis after one hit at 1763700059710.
  it.each([
    ['fixed-window', { endsAt: 1_763_700_060_000, count: 1 }, '1763700060000' + '1' + '1'],
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
