import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { SpaceSaving } from '../src/observe/telemetry/space-saving.js'

describe('SpaceSaving', () => {
  it('holds every item heavier than total ÷ capacity, each count at most its error above the truth', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 5 })), { maxLength: 400 }),
        fc.integer({ min: 1, max: 12 }),
        (stream, capacity) => {
          const sketch = new SpaceSaving(capacity)
          const truth = new Map<string, number>()
          let total = 0
          for (const [id, weight] of stream) {
            const item = `ip:${id}`
            sketch.add(item, weight)
            truth.set(item, (truth.get(item) ?? 0) + weight)
            total += weight
          }
          const held = new Map(sketch.entries().map((entry) => [entry.item, entry]))
          expect(held.size).toBeLessThanOrEqual(capacity)
          for (const [item, weight] of truth) {
            if (weight > total / capacity) expect(held.has(item), item).toBe(true)
          }
          for (const { item, count, error } of held.values()) {
            const real = truth.get(item) ?? 0
            expect(count).toBeGreaterThanOrEqual(real)
            expect(count - error).toBeLessThanOrEqual(real)
          }
          const counts = sketch.entries().map((entry) => entry.count)
          expect(counts).toEqual([...counts].sort((a, b) => b - a))
        },
      ),
      { numRuns: 300, seed: 7 },
    )
  })

  it('keeps a heavy hitter through a flood of distinct items', () => {
    const sketch = new SpaceSaving(100)
    for (let i = 0; i < 100_000; i++) {
      sketch.add(`ip:${i}`, 1)
      if (i % 10 === 0) sketch.add('ip:attacker', 1)
    }
    expect(sketch.entries()[0]?.item).toBe('ip:attacker')
    expect(sketch.size).toBe(100)
  })
})
