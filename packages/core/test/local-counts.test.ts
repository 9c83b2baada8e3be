import { describe, expect, it } from 'vitest'
import { LocalCounts } from '../src/stores/shared/local-counts.js'
import type { StoreRequest, StoreTarget } from '../src/stores/store.js'

const T = 1_763_712_000_000
const WINDOWS = [{ limit: 10, periodMs: 60_000 }]

function consume(identifier: string, cost = 1): StoreRequest {
  const target: StoreTarget = { rule: 'api', algorithm: 'fixed-window', windows: WINDOWS, identifier }
  return { operation: 'consume', targets: [target], cost }
}

const keyOf = (target: StoreTarget) => target.identifier

describe('LocalCounts, the one table a local failure policy counts on', () => {
  it('holds at most maxKeys counts under a flood of identifiers; the key evicted counts from zero again', () => {
    const counts = new LocalCounts(1, 100)
    expect(counts.evaluateTargets(consume('ip:first', 10), keyOf, T).allowed).toBe(true)
    expect(counts.evaluateTargets(consume('ip:first'), keyOf, T).allowed).toBe(false)
    for (let i = 0; i < 1_000; i++) {
      expect(counts.evaluateTargets(consume(`user:${i}`), keyOf, T).allowed).toBe(true)
      expect(counts.size).toBeLessThanOrEqual(100)
    }
    expect(counts.evaluateTargets(consume('ip:first', 10), keyOf, T).allowed).toBe(true)
  })

  it('gives a new key the place of a count that has ended before that of the oldest', () => {
    const counts = new LocalCounts(1, 3)
    const short = [{ limit: 10, periodMs: 1_000 }]
    const shortConsume = (identifier: string): StoreRequest => ({
      operation: 'consume',
      targets: [{ rule: 'burst', algorithm: 'fixed-window', windows: short, identifier }],
      cost: 1,
    })
    counts.evaluateTargets(consume('ip:oldest', 4), keyOf, T)
    counts.evaluateTargets(shortConsume('ip:ended'), keyOf, T)
    counts.evaluateTargets(consume('ip:third'), keyOf, T)
    // Two seconds on, the 1 s window's count has ended; the oldest's minute has not.
    counts.evaluateTargets(consume('ip:new'), keyOf, T + 2_000)
    expect(counts.size).toBe(3)
    const oldest = counts.evaluateTargets(consume('ip:oldest', 0), keyOf, T + 2_000)
    expect(oldest.windows[0]?.remaining).toBe(6)
  })

  it("counts each process's share of a limit: ⌈limit ÷ processes⌉", () => {
    const counts = new LocalCounts(3, 100)
    const admitted = Array.from({ length: 6 }, () => counts.evaluateTargets(consume('ip:a'), keyOf, T).allowed)
    expect(admitted).toEqual([true, true, true, true, false, false])
  })
})
