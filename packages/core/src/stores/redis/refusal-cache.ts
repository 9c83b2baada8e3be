import type { Window } from '../../rules/rules.js'
import { OldestFirst } from '../../support/oldest-first.js'
import { hasBlock } from '../shared/redis-wire.js'
import type { StoreResult, StoreTarget, StoreWindowResult } from '../store.js'

/** A refusal Redis answered, kept until the time it named. */
interface Refusal {
  /** Each target's windows as the refused request held them: a rule changed since is asked again. */
  readonly windowsOf: ReadonlyArray<readonly Window[]>
  /** The smallest cost known refused: a larger cost fits no sooner, a smaller one may fit now. */
  readonly cost: number
  /** The store's time when it refused, and the cache's when the request was sent. */
  readonly nowMs: number
  readonly sentAt: number
  /** The cache's time at which the refusal lapses: no later than the store's own. */
  readonly until: number
  readonly windows: StoreWindowResult[]
  /** Whether a block refused it: answered again with its reason. */
  readonly blocked: boolean
  /** Where it is kept: its one target's rule and identifier, or the pairs of its several targets. */
  readonly rule: string
  readonly identifier: string
  readonly pairs: readonly string[] | undefined
}

/**
 * Refusals answered in the process: once Redis answered that a request is refused until T (the
 * first time a window that refused it has room again), the same targets asked for at least that
 * cost are refused here until T, or for `maxHoldMs` if that ends sooner, with no round trip and
 * the same answer: every window as Redis reported it. A client hammering a key it is refused on
 * then costs Redis one round trip per `maxHoldMs` at most. (Upstash's `ephemeralCache` and
 * rate-limiter-flexible's `inMemoryBlockOnConsumed` do the same, without the hold's bound.)
 *
 * The one way its refusal can differ from Redis's: another process refunds or resets the key
 * meanwhile (an operator's `tollgate reset`, say), and this process keeps refusing for up to
 * `maxHoldMs`. A refund or reset through this store forgets the key at once, and a refusal whose
 * request was sent before any refund or reset through this store is not kept (Redis may have run
 * it before the refund). Its numbers are Redis's at the refusal: a window's `remaining` that time
 * would have raised since (a sliding window's, or one that did not refuse) is not raised; a
 * decision that charges one of its keys replaces it.
 *
 * A target stands for its key: the store's prefix is one, and a rule's state name with its
 * windows (checked on every answer) fixes the algorithm. A decision of one target, the common
 * case, is found by its rule and identifier as given, with no key built for it.
 *
 * Its times are the store's: given a clock, the store decides on that clock and the cache reads
 * the same one. On the Redis server's time, T is measured on the process's monotonic clock from
 * when the request was sent, which is before Redis decided: a kept refusal lapses no later than
 * Redis's, whatever the clocks' skew.
 */
export class RefusalCache {
  /** Refusals of one target, by rule, then identifier. */
  private readonly single = new Map<string, Map<string, Refusal>>()
  /** Refusals of several targets, by their pairs joined. */
  private readonly multiple = new Map<string, Refusal>()
  /** For each target's pair, the refusals of several targets that hold it. */
  private readonly holders = new Map<string, Set<Refusal>>()
  /** Every refusal kept, oldest first: the first to go when the cache is full. */
  private readonly kept = new OldestFirst<Refusal, true>()
  /** Refunds and resets so far: a request sent before one of them is not kept. */
  private changes = 0

  constructor(
    private readonly maxEntries: number,
    private readonly maxHoldMs: number,
  ) {}

  get size(): number {
    return this.kept.size
  }

  /** A mark to give `remember` for a request asked now. */
  get mark(): number {
    return this.changes
  }

  /**
   * The refusal standing for `targets` at `cost` at the cache's time `now`, as Redis answered it
   * with its time moved on; undefined when none.
   */
  find(targets: readonly StoreTarget[], cost: number, now: number): StoreResult | undefined {
    const refusal =
      targets.length === 1
        ? this.single.get((targets[0] as StoreTarget).rule)?.get((targets[0] as StoreTarget).identifier)
        : this.multiple.get(pairsOf(targets).join(''))
    if (refusal === undefined || cost < refusal.cost) return undefined
    // A refusal a block counts must reach Redis to count there (one kept from a decision in dry run, say).
    if (!refusal.blocked && hasBlock(targets)) return undefined
    if (now >= refusal.until || !sameWindows(refusal.windowsOf, targets)) {
      this.delete(refusal)
      return undefined
    }
    const nowMs = refusal.nowMs + Math.floor(now - refusal.sentAt)
    return refusal.blocked
      ? { allowed: false, blocked: true, nowMs, windows: refusal.windows }
      : { allowed: false, nowMs, windows: refusal.windows }
  }

  /**
   * Keeps a refusal that the request sent at the cache's time `sentAt` (with `mark` taken when
   * it was asked) got, if it names a time to wait for.
   */
  remember(targets: readonly StoreTarget[], cost: number, result: StoreResult, sentAt: number, mark: number): void {
    if (result.allowed || result.shed === true || mark !== this.changes) return
    // A refusal that a block counts must reach Redis each time, to count there; once blocked, it is kept.
    if (result.blocked !== true && hasBlock(targets)) return
    const { nowMs, windows } = result
    // Until the first refusing window has room again: till then every window that refused still
    // does, and the answer is Redis's own, windows and all.
    let fitsAt: number | undefined
    for (const { fitsAtMs } of windows) if (fitsAtMs > nowMs && !(fitsAtMs >= (fitsAt as number))) fitsAt = fitsAtMs
    if (fitsAt === undefined) return
    const one = targets.length === 1 ? (targets[0] as StoreTarget) : undefined
    const pairs = one === undefined ? pairsOf(targets) : undefined
    const refusal: Refusal = {
      windowsOf: targets.map((target) => target.windows),
      cost,
      nowMs,
      sentAt,
      until: sentAt + Math.min(fitsAt - nowMs, this.maxHoldMs),
      windows,
      blocked: result.blocked === true,
      rule: one?.rule ?? '',
      identifier: one?.identifier ?? '',
      pairs,
    }
    const existing = one
      ? this.single.get(one.rule)?.get(one.identifier)
      : this.multiple.get((pairs as string[]).join(''))
    if (existing !== undefined) this.delete(existing)
    else if (this.kept.size >= this.maxEntries) this.evictOldest()
    this.kept.set(refusal, true)
    if (one !== undefined) {
      let byIdentifier = this.single.get(one.rule)
      if (byIdentifier === undefined) {
        byIdentifier = new Map()
        this.single.set(one.rule, byIdentifier)
      }
      byIdentifier.set(one.identifier, refusal)
      return
    }
    this.multiple.set((pairs as string[]).join(''), refusal)
    for (const pair of pairs as string[]) {
      let holding = this.holders.get(pair)
      if (holding === undefined) {
        holding = new Set()
        this.holders.set(pair, holding)
      }
      holding.add(refusal)
    }
  }

  /** Forgets every refusal on these targets' keys: a refund or a reset is on its way to Redis. */
  forget(targets: readonly StoreTarget[]): void {
    this.changes++
    this.charged(targets)
  }

  /** Forgets every refusal on these targets' keys, whose windows a decision just charged: their numbers moved. */
  charged(targets: readonly StoreTarget[]): void {
    if (this.kept.size === 0) return
    for (const target of targets) {
      const alone = this.single.get(target.rule)?.get(target.identifier)
      if (alone !== undefined) this.delete(alone)
      const holding = this.holders.get(pairOf(target))
      if (holding !== undefined) for (const refusal of holding) this.delete(refusal)
    }
  }

  private evictOldest(): void {
    const oldest = this.kept.oldestKey()
    if (oldest !== undefined) this.delete(oldest)
  }

  private delete(refusal: Refusal): void {
    this.kept.delete(refusal)
    const { pairs } = refusal
    if (pairs === undefined) {
      const byIdentifier = this.single.get(refusal.rule)
      if (byIdentifier?.get(refusal.identifier) !== refusal) return
      byIdentifier.delete(refusal.identifier)
      if (byIdentifier.size === 0) this.single.delete(refusal.rule)
      return
    }
    const joined = pairs.join('')
    if (this.multiple.get(joined) === refusal) this.multiple.delete(joined)
    for (const pair of pairs) {
      const holding = this.holders.get(pair)
      if (holding === undefined) continue
      holding.delete(refusal)
      if (holding.size === 0) this.holders.delete(pair)
    }
  }
}

/**
 * A target's rule and identifier as one string, each part led by its length: identifiers may hold
 * any character, and no two lists of targets may join to the same text.
 */
function pairOf({ rule, identifier }: StoreTarget): string {
  return `${rule.length}:${rule}${identifier.length}:${identifier}`
}

function pairsOf(targets: readonly StoreTarget[]): string[] {
  return targets.map(pairOf)
}

function sameWindows(windowsOf: ReadonlyArray<readonly Window[]>, targets: readonly StoreTarget[]): boolean {
  if (windowsOf.length !== targets.length) return false
  for (let t = 0; t < targets.length; t++) if (windowsOf[t] !== (targets[t] as StoreTarget).windows) return false
  return true
}
