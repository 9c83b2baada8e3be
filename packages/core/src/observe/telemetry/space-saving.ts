/**
 * The heaviest items of a stream in bounded memory (Metwally, Agrawal and El Abbadi's
 * Space-Saving): at most `capacity` counters; an item not held replaces the smallest, inheriting
 * its count as its possible overcount (`error`). Every item whose true weight exceeds
 * total ÷ capacity is held, and each held count is at most `error` above the truth. A min-heap
 * of the counters finds the smallest in O(log capacity), so a flood of distinct items costs each
 * the same.
 */
export class SpaceSaving {
  private readonly items: string[] = []
  private readonly counts: number[] = []
  private readonly errors: number[] = []
  /** Where each held item sits in the heap. */
  private readonly at = new Map<string, number>()

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.items.length
  }

  add(item: string, weight: number): void {
    const held = this.at.get(item)
    if (held !== undefined) {
      this.counts[held] = (this.counts[held] as number) + weight
      this.down(held)
      return
    }
    if (this.items.length < this.capacity) {
      this.items.push(item)
      this.counts.push(weight)
      this.errors.push(0)
      this.at.set(item, this.items.length - 1)
      this.up(this.items.length - 1)
      return
    }
    // The smallest counter, at the heap's root, goes to the new item.
    const smallest = this.counts[0] as number
    this.at.delete(this.items[0] as string)
    this.items[0] = item
    this.counts[0] = smallest + weight
    this.errors[0] = smallest
    this.at.set(item, 0)
    this.down(0)
  }

  /** Held items, heaviest first: `count` may exceed the truth by at most `error`. */
  entries(): Array<{ item: string; count: number; error: number }> {
    return this.items
      .map((item, i) => ({ item, count: this.counts[i] as number, error: this.errors[i] as number }))
      .sort((a, b) => b.count - a.count)
  }

  clear(): void {
    this.items.length = 0
    this.counts.length = 0
    this.errors.length = 0
    this.at.clear()
  }

  private up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if ((this.counts[parent] as number) <= (this.counts[i] as number)) return
      this.swap(i, parent)
      i = parent
    }
  }

  private down(i: number): void {
    const size = this.items.length
    for (;;) {
      const left = 2 * i + 1
      const right = left + 1
      let least = i
      if (left < size && (this.counts[left] as number) < (this.counts[least] as number)) least = left
      if (right < size && (this.counts[right] as number) < (this.counts[least] as number)) least = right
      if (least === i) return
      this.swap(i, least)
      i = least
    }
  }

  private swap(i: number, j: number): void {
    const { items, counts, errors } = this
    ;[items[i], items[j]] = [items[j] as string, items[i] as string]
    ;[counts[i], counts[j]] = [counts[j] as number, counts[i] as number]
    ;[errors[i], errors[j]] = [errors[j] as number, errors[i] as number]
    this.at.set(items[i] as string, i)
    this.at.set(items[j] as string, j)
  }
}
