import type { Override } from './override.js'

/** A rule's change: its new override (null: dropped), and whether a map would hold it after every other rule. */
interface Change {
  readonly override: Override | null
  readonly last: boolean
}

/** Changes kept beside their base before they are merged into a map of their own: a sixteenth of the base, and at least this many. */
const MIN_CHANGES_KEPT_APART = 64

/**
 * Overrides as a base map and the changes made on top of it since, so that changing a few rules
 * of tens of thousands copies the few, not the tens of thousands. Changes made on changed
 * overrides join the same layer over the same base, and once they grow past a sixteenth of it
 * they are merged into a map of their own: the cost of the copy is spread over as many changes.
 */
export class ChangedOverrides implements ReadonlyMap<string, Override> {
  readonly [Symbol.toStringTag] = 'ChangedOverrides'
  private merged: Map<string, Override> | undefined
  private count: number | undefined

  private constructor(
    private readonly base: ReadonlyMap<string, Override>,
    private readonly changes: ReadonlyMap<string, Change>,
  ) {}

  /** `overrides` with `changes` made: options to set, null to drop. */
  static of(
    overrides: ReadonlyMap<string, Override>,
    changes: ReadonlyArray<readonly [string, Override | null]>,
  ): ReadonlyMap<string, Override> {
    const layered = overrides instanceof ChangedOverrides
    const base = layered ? overrides.base : overrides
    const all = new Map(layered ? overrides.changes : undefined)
    for (const [name, override] of changes) {
      const earlier = all.get(name)
      const held = earlier === undefined ? base.has(name) : earlier.override !== null
      // As a map would: a rule it does not hold goes after every other, one it holds stays where it is.
      if (override !== null && !held) all.delete(name)
      all.set(name, { override, last: override !== null && (!held || earlier?.last === true) })
    }
    const next = new ChangedOverrides(base, all)
    return all.size > Math.max(MIN_CHANGES_KEPT_APART, base.size / 16) ? next.flat() : next
  }

  get size(): number {
    if (this.count === undefined) {
      let count = this.base.size
      for (const [name, { override }] of this.changes) {
        const held = this.base.has(name)
        if (override === null && held) count--
        else if (override !== null && !held) count++
      }
      this.count = count
    }
    return this.count
  }

  get(name: string): Override | undefined {
    const change = this.changes.get(name)
    return change === undefined ? this.base.get(name) : (change.override ?? undefined)
  }

  has(name: string): boolean {
    return this.get(name) !== undefined
  }

  forEach(each: (value: Override, key: string, map: ReadonlyMap<string, Override>) => void, thisArg?: unknown): void {
    for (const [name, override] of this.flat()) each.call(thisArg, override, name, this)
  }

  entries(): MapIterator<[string, Override]> {
    return this.flat().entries()
  }

  keys(): MapIterator<string> {
    return this.flat().keys()
  }

  values(): MapIterator<Override> {
    return this.flat().values()
  }

  [Symbol.iterator](): MapIterator<[string, Override]> {
    return this.flat().entries()
  }

  /** As one map, made on first use, in the order a map changed the same way would have. */
  private flat(): Map<string, Override> {
    if (this.merged === undefined) {
      const merged = new Map(this.base)
      for (const [name, { override, last }] of this.changes) {
        if (override === null || last) merged.delete(name)
        if (override !== null) merged.set(name, override)
      }
      this.merged = merged
    }
    return this.merged
  }
}
