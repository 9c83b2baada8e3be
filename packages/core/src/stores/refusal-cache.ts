import type { Window } from '../rules.js'
import type { StoreResult, StoreTarget, StoreWindowResult } from './store.js'

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
  /** Its keys, when it has several: to forget it when one of them is refunded or reset. */
  readonly keys: readonly string[] | undefined
}

/**
 * Refusals answered in the process: once Redis answered that a request is refused until T (the
 * first time a window that refused it has room again), the same keys asked for at least that
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
 * Its times are the store's: given a clock, the store decides on that clock and the cache
 * reads the same one. On the Redis server's time, T is measured on the process's monotonic
 * clock from when the request was sent, which is before Redis decided: a kept refusal lapses no
 * later than Redis's, whatever the clocks' skew.
 */
export class RefusalCache {
  private readonly entries = new Map<string, Refusal>()
  /** For each key of a refusal that has several, the refusals that hold it. */
  private readonly shared = new Map<string, Set<string>>()
  /** Refunds and resets so far: a request sent before one of them is not kept. */
  private changes = 0

  constructor(
    private readonly maxEntries: number,
    private readonly maxHoldMs: number,
  ) {}

  get size(): number {
    return this.entries.size
  }

  /** A mark to give `remember` for a request sent now. */
  get mark(): number {
    return this.changes
  }

  /**
   * The refusal standing for `entryKey` at `cost` at the cache's time `now`, as Redis answered
   * it with its time moved on; undefined when none.
   */
  find(entryKey: string, targets: readonly StoreTarget[], cost: number, now: number): StoreResult | undefined {
    const refusal = this.entries.get(entryKey)
    if (refusal === undefined || cost < refusal.cost) return undefined
    if (now >= refusal.until || !sameWindows(refusal.windowsOf, targets)) {
      this.delete(entryKey, refusal)
      return undefined
    }
    return { allowed: false, nowMs: refusal.nowMs + Math.floor(now - refusal.sentAt), windows: refusal.windows }
  }

  /**
   * Keeps a refusal that the request sent at the cache's time `sentAt` (with `mark` taken when
   * it was asked) got, if it names a time to wait for. `keys` are the request's keys when it has
   * several.
   */
  remember(
    entryKey: string,
    keys: readonly string[] | undefined,
    targets: readonly StoreTarget[],
    cost: number,
    result: StoreResult,
    sentAt: number,
    mark: number,
  ): void {
    if (result.allowed || result.shed === true || mark !== this.changes) return
    const { nowMs, windows } = result
    // Until the first refusing window has room again: till then every window that refused still
    // does, and the answer is Redis's own, windows and all.
    let fitsAt: number | undefined
    for (const { fitsAtMs } of windows) if (fitsAtMs > nowMs && !(fitsAtMs >= (fitsAt as number))) fitsAt = fitsAtMs
    if (fitsAt === undefined) return
    const existing = this.entries.get(entryKey)
    if (existing !== undefined) this.delete(entryKey, existing)
    else if (this.entries.size >= this.maxEntries) this.evictOldest()
    this.entries.set(entryKey, {
      windowsOf: targets.map((target) => target.windows),
      cost,
      nowMs,
      sentAt,
      until: sentAt + Math.min(fitsAt - nowMs, this.maxHoldMs),
      windows,
      keys,
    })
    if (keys !== undefined) {
      for (const key of keys) {
        let holders = this.shared.get(key)
        if (holders === undefined) {
          holders = new Set()
          this.shared.set(key, holders)
        }
        holders.add(entryKey)
      }
    }
  }

  /** Forgets every refusal on these keys: a refund or a reset is on its way to Redis. */
  forget(keys: readonly string[]): void {
    this.changes++
    this.charged(keys)
  }

  /** Forgets every refusal on these keys, whose windows a decision just charged: their numbers moved. */
  charged(keys: readonly string[]): void {
    if (this.entries.size === 0) return
    for (const key of keys) {
      const refusal = this.entries.get(key)
      if (refusal !== undefined) this.delete(key, refusal)
      const holders = this.shared.get(key)
      if (holders === undefined) continue
      for (const entryKey of holders) {
        const held = this.entries.get(entryKey)
        if (held !== undefined) this.delete(entryKey, held)
      }
    }
  }

  private evictOldest(): void {
    for (const [entryKey, refusal] of this.entries) {
      this.delete(entryKey, refusal)
      return
    }
  }

  private delete(entryKey: string, refusal: Refusal): void {
    this.entries.delete(entryKey)
    if (refusal.keys === undefined) return
    for (const key of refusal.keys) {
      const holders = this.shared.get(key)
      if (holders === undefined) continue
      holders.delete(entryKey)
      if (holders.size === 0) this.shared.delete(key)
    }
  }
}

function sameWindows(windowsOf: ReadonlyArray<readonly Window[]>, targets: readonly StoreTarget[]): boolean {
  if (windowsOf.length !== targets.length) return false
  for (let t = 0; t < targets.length; t++) if (windowsOf[t] !== (targets[t] as StoreTarget).windows) return false
  return true
}

/** The key a decision's refusal is kept under: its one key, or all of them. */
export function refusalKeyOf(keys: readonly string[]): string {
  return keys.length === 1 ? (keys[0] as string) : keys.join('\n')
}
