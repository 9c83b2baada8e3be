/** One entry, linked to the entries written just before and just after it. */
interface Entry<K, V> {
  readonly key: K
  value: V
  older: Entry<K, V> | undefined
  newer: Entry<K, V> | undefined
}

/**
 * A map in the order of last writes that gives up its oldest entry at once, for tables bounded
 * by dropping their oldest. A Map's own first key is no such thing: an entry deleted stays in its
 * table as a hole until the table is rebuilt, and finding the first key steps over every hole
 * before it, so a Map kept full by deleting its first key takes longer for each the fuller it is
 * (bench/README.md, `lockout-flood`). Here the entries are also linked oldest to newest.
 */
export class OldestFirst<K, V> {
  private readonly entries = new Map<K, Entry<K, V>>()
  private oldest: Entry<K, V> | undefined
  private newest: Entry<K, V> | undefined

  get size(): number {
    return this.entries.size
  }

  get(key: K): V | undefined {
    return this.entries.get(key)?.value
  }

  has(key: K): boolean {
    return this.entries.has(key)
  }

  /** Sets the key's value, which makes it the newest entry. */
  set(key: K, value: V): void {
    const entry = this.entries.get(key)
    if (entry !== undefined) {
      entry.value = value
      if (entry === this.newest) return
      this.unlink(entry)
      this.link(entry)
      return
    }
    const made: Entry<K, V> = { key, value, older: undefined, newer: undefined }
    this.link(made)
    this.entries.set(key, made)
  }

  delete(key: K): boolean {
    const entry = this.entries.get(key)
    if (entry === undefined) return false
    this.unlink(entry)
    this.entries.delete(key)
    return true
  }

  /** The key written longest ago; undefined when empty. */
  oldestKey(): K | undefined {
    return this.oldest?.key
  }

  /** Deletes the entry written longest ago, if any. */
  deleteOldest(): void {
    const { oldest } = this
    if (oldest !== undefined) this.delete(oldest.key)
  }

  /** Keys and values, oldest first. The entry just given may be deleted before the next is asked for. */
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    for (let entry = this.oldest; entry !== undefined; ) {
      const { newer } = entry
      yield [entry.key, entry.value]
      entry = newer
    }
  }

  clear(): void {
    this.entries.clear()
    this.oldest = undefined
    this.newest = undefined
  }

  private link(entry: Entry<K, V>): void {
    entry.older = this.newest
    entry.newer = undefined
    if (this.newest === undefined) this.oldest = entry
    else this.newest.newer = entry
    this.newest = entry
  }

  private unlink(entry: Entry<K, V>): void {
    const { older, newer } = entry
    if (older === undefined) this.oldest = newer
    else older.newer = newer
    if (newer === undefined) this.newest = older
    else newer.older = older
    entry.older = entry.newer = undefined
  }
}
