import { setImmediate } from 'node:timers'

/**
 * Collects work by group until the event loop's current turn is done, then hands each group
 * over in chunks of at most `maxSize`. Flushing on `setImmediate` runs after every I/O callback
 * of the turn and every promise continuation they set off: the decisions of all the requests
 * one poll of the sockets delivered, or that one Redis reply released, leave in the same batch.
 * A lone call waits for no timer, only for the turn to end. (Flushing on `process.nextTick`
 * instead made batches of one under HTTP load, where each request arrives in a callback of its
 * own: one script call per request; bench/README.md has the measured cost.)
 * `setImmediate` comes from `node:timers`, not the global that test fake timers replace: a
 * decision on a real Redis must not wait for a fake clock to be advanced.
 */
export class Batches<T> {
  private groups = new Map<number, T[]>()
  /** The groups' other Map, swapped in at each flush: a flush then allocates no Map. */
  private spare = new Map<number, T[]>()
  private scheduled = false

  constructor(
    private readonly maxSize: number,
    private readonly flushGroup: (group: number, items: T[]) => void,
  ) {}

  add(group: number, item: T): void {
    let items = this.groups.get(group)
    if (items === undefined) {
      items = []
      this.groups.set(group, items)
    }
    items.push(item)
    if (items.length >= this.maxSize) {
      this.groups.delete(group)
      this.flushGroup(group, items)
      return
    }
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.flush)
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false
    const groups = this.groups
    // Work added while flushing (a receiver deciding again at once) goes to the other Map.
    this.groups = this.spare
    for (const [group, items] of groups) this.flushGroup(group, items)
    groups.clear()
    this.spare = groups
  }
}
