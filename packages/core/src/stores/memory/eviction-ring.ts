/** An entry of the ring; the entries link to each other, so the ring costs nothing beside them. */
export interface RingEntry<E> {
  /** Used since the hand last passed it: it is passed over once more (the CLOCK policy). */
  used: boolean
  prev: E
  next: E
}

/**
 * The order in which a full store forgets: CLOCK, a hand going round the entries and taking the
 * first one not used since it last came by; each step either clears a mark that a use paid for
 * or finds the entry to drop. A new entry goes just behind the hand, the last place it reaches.
 *
 * Positions are entries, never a Map iterator: V8 keeps every hash table a Map rehashes away
 * reachable from an iterator that has not moved since, with every entry those tables held.
 */
export class EvictionRing<E extends RingEntry<E>> {
  private held = 0
  private hand: E | undefined
  private sweepAt: E | undefined
  private sweepLeft = 0

  get size(): number {
    return this.held
  }

  add(entry: E): void {
    this.held++
    const hand = this.hand
    if (hand === undefined) {
      entry.prev = entry
      entry.next = entry
      this.hand = entry
      return
    }
    entry.next = hand
    entry.prev = hand.prev
    hand.prev.next = entry
    hand.prev = entry
  }

  remove(entry: E): void {
    if (--this.held === 0) {
      this.clear()
      return
    }
    entry.prev.next = entry.next
    entry.next.prev = entry.prev
    if (this.hand === entry) this.hand = entry.next
    if (this.sweepAt === entry) this.sweepAt = entry.next
  }

  /** Puts `entry` where the first entry the hand finds unused was, and returns that one. */
  replaceUnused(entry: E): E {
    let victim = this.hand
    if (victim === undefined) throw new Error('an empty ring has nothing to replace')
    // Ends within one turn and a step: the turn clears every mark.
    while (victim.used) {
      victim.used = false
      victim = victim.next
    }
    if (victim.next === victim) {
      entry.prev = entry
      entry.next = entry
    } else {
      entry.prev = victim.prev
      entry.next = victim.next
      victim.prev.next = entry
      victim.next.prev = entry
    }
    this.hand = entry.next
    if (this.sweepAt === victim) this.sweepAt = entry
    return victim
  }

  /** Starts a sweep over every entry held now. */
  startSweep(): void {
    this.sweepAt = this.hand
    this.sweepLeft = this.held
  }

  /**
   * Shows `visit` the sweep's next `budget` entries; `visit` may remove the entry it is shown.
   * True once the sweep is over. Entries added meanwhile may take the place of some it had yet to
   * see: those wait for the next sweep.
   */
  sweep(budget: number, visit: (entry: E) => void): boolean {
    for (let seen = 0; seen < budget; seen++) {
      const entry = this.sweepAt
      if (entry === undefined || this.sweepLeft === 0) break
      this.sweepAt = entry.next
      this.sweepLeft--
      visit(entry)
    }
    return this.sweepAt === undefined || this.sweepLeft === 0
  }

  clear(): void {
    this.held = 0
    this.hand = undefined
    this.sweepAt = undefined
    this.sweepLeft = 0
  }
}
