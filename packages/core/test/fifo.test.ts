import { describe, expect, it } from 'vitest'
import { Fifo } from '../src/support/fifo.js'

describe('Fifo', () => {
  it('gives items back oldest first, across the cuts of taken items, pushes and shifts interleaved', () => {
    const fifo = new Fifo<number>()
    // What went in, in order, and how many of it came out: the queue must give back exactly that.
    const reference: number[] = []
    let taken = 0
    let next = 0
    // Bursts of pushes, then drains of various lengths: the queue grows past and shrinks below
    // the length at which taken items are cut off, again and again.
    for (let round = 0; round < 60; round++) {
      const pushes = (round * 977) % 5_000
      for (let i = 0; i < pushes; i++) {
        fifo.push(next)
        reference.push(next++)
      }
      const shifts = (round * 1_231) % 6_000
      const out: Array<number | undefined> = []
      for (let i = 0; i < shifts; i++) out.push(fifo.shift())
      // Past the end, a shift gives undefined.
      const expected = reference.slice(taken, taken + shifts)
      while (expected.length < shifts) expected.push(undefined as never)
      taken = Math.min(reference.length, taken + shifts)
      expect(out, `round ${round}`).toEqual(expected)
      expect(fifo.size).toBe(reference.length - taken)
    }
    while (taken < reference.length) expect(fifo.shift()).toBe(reference[taken++])
    expect(fifo.shift()).toBeUndefined()
    expect(fifo.size).toBe(0)
    expect(next).toBeGreaterThan(100_000)
  })

  it('is empty again after a shift past its end, and takes new items', () => {
    const fifo = new Fifo<string>()
    expect(fifo.shift()).toBeUndefined()
    fifo.push('a')
    expect(fifo.shift()).toBe('a')
    expect(fifo.shift()).toBeUndefined()
    fifo.push('b')
    expect(fifo.size).toBe(1)
    expect(fifo.shift()).toBe('b')
  })
})
