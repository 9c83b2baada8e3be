import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { parseDuration } from '../src/index.js'
import { formatDuration, MAX_PERIOD_MS } from '../src/support/duration.js'

const DAY = 86_400_000

describe('parseDuration', () => {
  it.each([
    [500, 500],
    [1, 1],
    [MAX_PERIOD_MS, MAX_PERIOD_MS],
    ['500ms', 500],
    ['3s', 3_000],
    ['1m', 60_000],
    ['1.5m', 90_000],
    ['0.5s', 500],
    ['1h', 3_600_000],
    ['1d', DAY],
    ['366d', 366 * DAY],
    ['007s', 7_000],
  ])('%j → %d', (value, ms) => {
    expect(parseDuration(value)).toBe(ms)
  })

  it.each([
    [' 3s ', 3_000],
    ['3 s', 3_000],
    ['\t3s\n', 3_000],
  ])('tolerates whitespace around and inside: %j → %d', (value, ms) => {
    expect(parseDuration(value)).toBe(ms)
  })

  // Regression: '15 minutes', as people write it in configuration, was "not a duration".
  it.each([
    ['15 minutes', 900_000],
    ['15minutes', 900_000],
    ['1 minute', 60_000],
    ['2 min', 120_000],
    ['2min', 120_000],
    ['1.5 hours', 5_400_000],
    ['1 hour', 3_600_000],
    ['3 hr', 10_800_000],
    ['1 day', DAY],
    ['7 days', 7 * DAY],
    ['30 seconds', 30_000],
    ['1 second', 1_000],
    ['10 sec', 10_000],
    ['250 milliseconds', 250],
    ['1 millisecond', 1],
    ['15 Minutes', 900_000],
    ['15 MINUTES', 900_000],
    ['3S', 3_000],
    ['500MS', 500],
    ['1 Day', DAY],
    ['2 mInUtEs', 120_000],
  ])('reads the unit as written: %j → %d', (value, ms) => {
    expect(parseDuration(value)).toBe(ms)
  })

  it('names the forms it accepts when it refuses one', () => {
    const message = parseDuration('15 minuets')
    expect(message).toContain('"15 minuets" is not a duration')
    for (const unit of [
      'ms',
      'millisecond(s)',
      's',
      'sec',
      'second(s)',
      'min',
      'minute(s)',
      'hr',
      'hour(s)',
      'day(s)',
    ]) {
      expect(message).toContain(unit)
    }
    expect(message).toContain("'15 minutes'")
  })

  it.each(['15 minuets', '3 weeks', '1 mo', '2 secs', '1 hrs', '1 d a y', '5 m s'])('refuses the unit %j', (value) => {
    expect(parseDuration(value)).toContain('is not a duration')
  })

  it('is exactly 366 days at most', () => {
    expect(MAX_PERIOD_MS).toBe(366 * DAY)
  })

  it.each([
    [0, '0 must be a positive duration'],
    [-5, '-5 must be a positive duration'],
    [Number.NaN, 'NaN must be a positive duration'],
    [Number.POSITIVE_INFINITY, 'Infinity must be a positive duration'],
    [1.5, '1.5 is not a whole number of milliseconds'],
    ['0.5ms', '"0.5ms" is not a whole number of milliseconds'],
    ['0s', '"0s" must be a positive duration'],
    [MAX_PERIOD_MS + 1, `${MAX_PERIOD_MS + 1} is longer than the maximum of 366 days`],
    ['367d', '"367d" is longer than the maximum of 366 days'],
    ['abc', '"abc" is not a duration'],
    ['3 weeks', '"3 weeks" is not a duration'],
    ['3w', '"3w" is not a duration'],
    ['3', '"3" is not a duration'],
    ['', '"" is not a duration'],
    ['-3s', '"-3s" is not a duration'],
    ['.5s', '".5s" is not a duration'],
    ['1e3ms', '"1e3ms" is not a duration'],
    ['3s3s', '"3s3s" is not a duration'],
    [null, 'null is not a duration'],
    [undefined, 'undefined is not a duration'],
    [true, 'true is not a duration'],
    [10n, '10n is not a duration'],
    [{ ms: 5 }, '{"ms":5} is not a duration'],
  ])('%s is refused with a message naming it', (value, message) => {
    const result = parseDuration(value)
    expect(typeof result).toBe('string')
    expect(result).toContain(message)
  })

  it('shortens a very long string in its message', () => {
    const result = parseDuration(`${'9'.repeat(200)}x`)
    expect(typeof result).toBe('string')
    expect(result).toContain(`"${'9'.repeat(57)}..."`)
    expect(result).not.toContain('9'.repeat(58))
  })

  it('reads any whole number of milliseconds written as a number or as ms', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAX_PERIOD_MS }), (ms) => {
        expect(parseDuration(ms)).toBe(ms)
        expect(parseDuration(`${ms}ms`)).toBe(ms)
      }),
    )
  })

  it('reads back what formatDuration writes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAX_PERIOD_MS }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms)
      }),
    )
  })

  // Regression: 4.1 × 60000 is 245999.99999999997 in floating point, and such exact decimal
  // spellings were refused as "not a whole number of milliseconds".
  it.each([
    ['4.1m', 246_000],
    ['2.01s', 2_010],
    ['1.001s', 1_001],
  ])('reads the decimal %s as %d ms', (value, ms) => {
    expect(parseDuration(value)).toBe(ms)
  })
})

describe('formatDuration', () => {
  it.each([
    [3_000, '3s'],
    [90_000, '90s'],
    [60_000, '1m'],
    [5_400_000, '90m'],
    [3_600_000, '1h'],
    [DAY, '1d'],
    [2 * DAY, '2d'],
    [36 * 3_600_000, '36h'],
    [1_500, '1500ms'],
    [1, '1ms'],
  ])('%d → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text)
  })
})
