/**
 * A first-in first-out queue whose `shift` costs the same however long it is. An array's own
 * `shift` moves every item left behind once the array is large, so draining a queue of n items
 * that way costs n², and a flood queued that way would hold the process (bench/README.md,
 * `backlog-flood`). Here items taken are only counted, and cut off the array in one go once they
 * are half of it.
 */
export class Fifo<T> {
  private items: Array<T | undefined> = []
  /** Where the items not taken yet begin. */
  private head = 0

  get size(): number {
    return this.items.length - this.head
  }

  push(item: T): void {
    this.items.push(item)
  }

  /** The oldest item, taken off the queue; undefined when it is empty. */
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]
    // Not held once taken: the queue must not keep what its callers are done with alive.
    this.items[this.head] = undefined
    this.head++
    if (this.head === this.items.length) {
      this.items = []
      this.head = 0
    } else if (this.head >= CUT_AT && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
}

/** The fewest taken items worth cutting off: a short queue is not copied at every shift. */
const CUT_AT = 1_024
