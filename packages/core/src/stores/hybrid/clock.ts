import { performance } from 'node:perf_hooks'

/**
 * A HybridStore's default time: this process's monotonic clock, offset to the Redis server's
 * `TIME` as each sync measures it, so that processes whose wall clocks disagree still stamp their
 * units on one timeline with the RedisStores that share the keys. Never goes back: a new offset
 * that would move it back holds it still until it catches up.
 */
export class ServerAlignedClock {
  /** Until the first sync: the wall clock. */
  private offset = Date.now() - performance.now()
  private last = 0
  /** How far the offset may be off: half the round trip it was measured in. */
  private uncertainty = 0

  readonly now = (): number => {
    const now = Math.floor(performance.now() + this.offset)
    if (now > this.last) this.last = now
    return this.last
  }

  /** The local monotonic time a sync is sent or answered at. */
  monotonic(): number {
    return performance.now()
  }

  /** The server said `serverMs` between `sentAt` and `answeredAt` (monotonic): taken as their middle. */
  measured(serverMs: number, sentAt: number, answeredAt: number): void {
    this.offset = serverMs - (sentAt + answeredAt) / 2
    this.uncertainty = (answeredAt - sentAt) / 2
  }

  /** Whole ms this clock may be behind or ahead of the server's, its own ms rounding included. */
  uncertaintyMs(): number {
    return Math.ceil(this.uncertainty) + 1
  }
}
