import { describe, expect, it } from 'vitest'
import { afterRefusal, lockoutExpiresAt } from '../src/algorithms/lockout.js'
import { createLimiter, decodeLockoutState, type LimiterOptions, loadRules, TollgateConfigError } from '../src/index.js'
import { blockOf } from '../src/rules/block.js'

const windows = [{ limit: 5, period: '1m' }] as const

function constructionError(block: unknown): string {
  try {
    createLimiter({ rules: { login: { windows, block } } } as LimiterOptions).close()
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    return (error as Error).message
  }
  throw new Error('createLimiter accepted the block')
}

describe('the rule option block', () => {
  it.each([
    [{}, "rule 'login': block.for undefined is not a duration"],
    [{ for: 0 }, "rule 'login': block.for 0 must be a positive duration"],
    [{ for: '15m', after: 0 }, "rule 'login': block.after must be an integer from 1 to 1000, got 0"],
    [{ for: '15m', after: 1.5 }, 'block.after must be an integer from 1 to 1000, got 1.5'],
    [{ for: '15m', factor: 0.5 }, "rule 'login': block.factor must be a number from 1 to 1000, got 0.5"],
    [{ for: '15m', max: '1m' }, "rule 'login': block.max (1m) must be at least for (15m): blocks only grow"],
    [{ for: '15m', forever: true }, "rule 'login': block"],
    ['15m', "rule 'login': block must be an object"],
  ])('refuses %j, naming the rule, the field and the value', (block, message) => {
    expect(constructionError(block)).toContain(message)
  })

  it('defaults after to 1, factor to 1 and max to for, or to a day when blocks grow', () => {
    expect(blockOf({ for: '15m' }, "rule 'r'")).toMatchObject({ forMs: 900_000, after: 1, factor: 1, maxMs: 900_000 })
    expect(blockOf({ for: '15m', factor: 2 }, "rule 'r'").maxMs).toBe(86_400_000)
    expect(blockOf({ for: '2d', factor: 2 }, "rule 'r'").maxMs).toBe(172_800_000)
    expect(blockOf({ for: '15m', after: 3, factor: 1.5, max: '1h' }, "rule 'r'").spec).toBe('#900000 3 1.5 3600000')
  })

  it('is read from a rules file, its durations in seconds', () => {
    const rules = loadRules(
      'limits:\n  - name: login\n    block: { for: 900, after: 3, factor: 2, max: 86400 }\n    config:\n      - { limit: 5, period: 900 }\n',
    )
    expect(rules.login?.block).toEqual({ for: '900s', after: 3, factor: 2, max: '86400s' })
    expect(createLimiter({ rules }).rules.get('login')?.block).toMatchObject({ forMs: 900_000, maxMs: 86_400_000 })
  })
})

describe('the lockout model', () => {
  const block = blockOf({ for: '10s', after: 2, factor: 3, max: '1m' }, "rule 'r'")
  const ruleWindows = [{ limit: 1, periodMs: 5_000 }]

  it('counts refusals within the longest period, blocks at after, and grows each block while the last is remembered', () => {
    const first = afterRefusal(undefined, block, ruleWindows, 1_000, 0)
    expect(first).toEqual({ until: 0, lastMs: 0, refusals: 1, firstAt: 1_000, window: 0 })
    expect(lockoutExpiresAt(first, ruleWindows)).toBe(6_000)
    // Past the longest period: counting starts over.
    expect(afterRefusal(first, block, ruleWindows, 6_000, 0).refusals).toBe(1)
    const blocked = afterRefusal(first, block, ruleWindows, 2_000, 0)
    expect(blocked).toEqual({ until: 12_000, lastMs: 10_000, refusals: 0, firstAt: 0, window: 0 })
    expect(lockoutExpiresAt(blocked, ruleWindows)).toBe(22_000)
    const again = afterRefusal(afterRefusal(blocked, block, ruleWindows, 13_000, 0), block, ruleWindows, 14_000, 0)
    expect(again.lastMs).toBe(30_000)
    const capped = afterRefusal(afterRefusal(again, block, ruleWindows, 45_000, 0), block, ruleWindows, 45_000, 0)
    expect(capped.lastMs).toBe(60_000)
    // Forgotten once as long as the last block has passed since it ended.
    const late = 105_000 + 60_000
    expect(afterRefusal(afterRefusal(capped, block, ruleWindows, late, 0), block, ruleWindows, late, 0).lastMs).toBe(
      10_000,
    )
  })

  it('reads a block key as the script writes it, and nothing else', () => {
    expect(decodeLockoutState('1700000060000 60000 0 0 1')).toEqual({
      until: 1_700_000_060_000,
      lastMs: 60_000,
      refusals: 0,
      firstAt: 0,
      window: 1,
    })
    expect(decodeLockoutState('1700000060000 60000 0 0')).toBeUndefined()
    expect(decodeLockoutState('')).toBeUndefined()
  })
})
