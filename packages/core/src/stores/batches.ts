/**
 * Collects work by group until the current tick is done, then hands each group over in chunks
 * of at most `maxSize`. Flushing on `process.nextTick` runs after every promise continuation of
 * the tick, so the decisions that one socket read sets off (callers awaiting their answers and
 * asking again) all leave in the same batch, while a lone call waits for no timer.
 */
export class Batches<T> {
  private groups = new Map<number, T[]>()
  private scheduled = false

  constructor(
    private readonly maxSize: number,
    private readonly flushGroup: (items: T[]) => void,
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
      this.flushGroup(items)
      return
    }
    if (!this.scheduled) {
      this.scheduled = true
      process.nextTick(this.flush)
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false
    const groups = this.groups
    this.groups = new Map()
    for (const items of groups.values()) this.flushGroup(items)
  }
}
