import { describe, expect, it } from 'vitest'
import { EvictionRing, type RingEntry } from '../src/stores/memory/eviction-ring.js'

class Item implements RingEntry<Item> {
  used = false
  prev: Item = this
  next: Item = this
  constructor(readonly id: number) {}
}

/** The ring's order from the hand on, walked through its links both ways. */
function order(ring: EvictionRing<Item>, from: Item | undefined): number[] {
  if (from === undefined) return []
  const forward: number[] = []
  let at = from
  for (let i = 0; i < ring.size; i++, at = at.next) forward.push(at.id)
  expect(at).toBe(from)
  const backward: number[] = []
  at = from.prev
  for (let i = 0; i < ring.size; i++, at = at.prev) backward.unshift(at.id)
  expect(backward).toEqual(forward)
  return forward
}

describe('EvictionRing', () => {
  it('replaces, in CLOCK order, what a plain list model replaces, over random adds, uses and removals', () => {
    // A list from the hand on: adds go last, the hand passes used items on to the end.
    let model: Item[] = []
    const ring = new EvictionRing<Item>()
    let seed = 0x2b1d
    const next = (below: number): number => {
      seed = (Math.imul(seed, 1_664_525) + 1_013_904_223) >>> 0
      return (seed >>> 8) % below
    }
    let made = 0
    for (let step = 0; step < 10_000; step++) {
      const roll = next(10)
      if (model.length === 0 || roll < 3) {
        const item = new Item(made++)
        ring.add(item)
        model.push(item)
      } else if (roll < 5) {
        const item = model[next(model.length)] as Item
        ring.remove(item)
        model = model.filter((held) => held !== item)
      } else if (roll < 7) {
        ;(model[next(model.length)] as Item).used = true
      } else {
        // The model first: the ring clears the same marks as it goes.
        let passed = 0
        while (passed < model.length && (model[passed] as Item).used) passed++
        const cleared = model.slice(0, passed)
        model = [...model.slice(passed), ...cleared]
        const item = new Item(made++)
        expect(ring.replaceUnused(item)).toBe(model[0])
        expect(cleared.filter((held) => held.used)).toEqual([])
        model = [...model.slice(1), item]
      }
      expect(ring.size).toBe(model.length)
      if (step % 97 === 0) expect(order(ring, model[0])).toEqual(model.map((item) => item.id))
    }
  })

  it('sweeps every item once, in slices, while the visit removes some', () => {
    const ring = new EvictionRing<Item>()
    const items = Array.from({ length: 25 }, (_, i) => new Item(i))
    for (const item of items) ring.add(item)
    const seen: number[] = []
    const slices: number[] = []
    ring.startSweep()
    for (let done = false; !done; ) {
      const before = seen.length
      done = ring.sweep(10, (item) => {
        seen.push(item.id)
        if (item.id % 3 === 0) ring.remove(item)
      })
      slices.push(seen.length - before)
    }
    expect(slices).toEqual([10, 10, 5])
    expect(seen).toEqual(items.map((item) => item.id))
    expect(ring.size).toBe(16)
  })

  it('ends a sweep whose ring empties, and starts afresh once refilled', () => {
    const ring = new EvictionRing<Item>()
    const items = [new Item(0), new Item(1)]
    for (const item of items) ring.add(item)
    ring.startSweep()
    expect(ring.sweep(1, () => {})).toBe(false)
    for (const item of items) ring.remove(item)
    expect(ring.sweep(1, () => {})).toBe(true)
    ring.add(new Item(2))
    expect(ring.replaceUnused(new Item(3)).id).toBe(2)
    expect(() => new EvictionRing<Item>().replaceUnused(new Item(4))).toThrow('empty ring')
  })
})
