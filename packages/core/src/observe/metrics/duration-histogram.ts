/**
 * Upper bounds, in seconds, of the buckets decision times are counted in: an in-process decision
 * takes microseconds, one on Redis a round trip, and `storeTimeoutMs` (100 ms by default) bounds
 * a silent store's; a flood queued behind itself may take longer, and counts in the last bucket.
 */
export const DEFAULT_DURATION_BUCKETS: readonly number[] = [
  0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
  0.05, 0.1, 0.25,
]

/** Timed decisions, counted per bucket as Prometheus histograms count them. */
export interface DurationCounts {
  /** Each bucket's upper bound, seconds, ascending. */
  readonly bounds: readonly number[]
  /**
   * Times per bucket, not cumulative: `counts[i]` holds those above `bounds[i - 1]` and at most
   * `bounds[i]`; the last entry, one past `bounds`, those above every bound.
   */
  readonly counts: Float64Array
  /** Seconds, over every time counted. */
  readonly sum: number
  readonly count: number
}

export class DurationHistogram implements DurationCounts {
  readonly counts: Float64Array
  sum = 0
  count = 0

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe(seconds: number): void {
    const { bounds } = this
    let bucket = 0
    while (bucket < bounds.length && seconds > (bounds[bucket] as number)) bucket++
    this.counts[bucket] = (this.counts[bucket] as number) + 1
    this.sum += seconds
    this.count++
  }
}
