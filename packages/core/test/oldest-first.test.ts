import { describe, expect, it } from 'vitest'
import { OldestFirst } from '../src/support/oldest-first.js'
import { seededRandom } from './random-fixtures.js'

describe('OldestFirst', () => {
  it('keeps the order of last writes through sets, rewrites, deletes and drops of the oldest', () => {
    const random = seededRandom(11)
    const table = new OldestFirst<string, number>()
    // The model: a Map deleted from and written to again, which keeps the order of last writes.
    const model = new Map<string, number>()
    for (let step = 0; step < 20_000; step++) {
      const key = `k${random(300)}`
      const roll = random(10)
      if (roll < 6) {
        table.set(key, step)
        model.delete(key)
        model.set(key, step)
      } else if (roll < 8) {
        expect(table.delete(key)).toBe(model.delete(key))
      } else {
        const oldest = model.keys().next().value
        expect(table.oldestKey()).toBe(oldest)
        table.deleteOldest()
        if (oldest !== undefined) model.delete(oldest)
      }
      expect(table.size).toBe(model.size)
      expect(table.get(key)).toBe(model.get(key))
      expect(table.has(key)).toBe(model.has(key))
      if (step % 1_000 === 0) expect([...table]).toEqual([...model])
    }
    expect([...table]).toEqual([...model])
  })

  it('lets each entry be deleted as it is given, and is empty after', () => {
    const table = new OldestFirst<number, string>()
    for (let i = 0; i < 10; i++) table.set(i, `v${i}`)
    table.set(3, 'again')
    const seen: number[] = []
    for (const [key, value] of table) {
      seen.push(key)
      if (key !== 5) table.delete(key)
      else expect(value).toBe('v5')
    }
    expect(seen).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9, 3])
    expect([...table]).toEqual([[5, 'v5']])
    table.clear()
    expect(table.size).toBe(0)
    expect(table.oldestKey()).toBeUndefined()
    table.deleteOldest()
    expect([...table]).toEqual([])
  })
})
