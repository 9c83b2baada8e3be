/**
 * Rows in a growing Int32Array: the keys listed for the next sync, each in half the room an array
 * of numbers gives it, and never more than the keys tracked, since a key is listed once.
 */
export class RowList {
  private items = new Int32Array(1024)
  length = 0

  constructor(private readonly most: number) {}

  push(row: number): void {
    if (this.length === this.items.length) {
      const larger = new Int32Array(Math.max(this.items.length + 1, Math.min(this.most, this.items.length * 2)))
      larger.set(this.items)
      this.items = larger
    }
    this.items[this.length++] = row
  }

  /** Keeps the rows `keep` says to keep, in order, and hands every other to `take`. */
  filter(keep: (row: number) => boolean): void {
    let kept = 0
    for (let i = 0; i < this.length; i++) {
      const row = this.items[i] as number
      if (keep(row)) this.items[kept++] = row
    }
    this.length = kept
  }
}
