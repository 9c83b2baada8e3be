/**
 * - `sliding-log`: exact; every admitted unit is remembered until it leaves the longest window.
 * - `fixed-window`: one counter per window, reset at period boundaries aligned to the epoch.
 * - `sliding-window`: current and previous fixed-window counters, the previous one weighted by
 *   how much of it still overlaps the sliding window; O(1) memory, approximate.
 * - `token-bucket`: a bucket of `limit` tokens refilled continuously at `limit` per `period`.
 * - `gcra`: the generic cell rate algorithm (leaky bucket as a meter); admits exactly what a
 *   token bucket of the same limit and period admits.
 */
export type AlgorithmName = 'sliding-log' | 'fixed-window' | 'sliding-window' | 'token-bucket' | 'gcra'

export const ALGORITHMS: readonly AlgorithmName[] = [
  'sliding-log',
  'fixed-window',
  'sliding-window',
  'token-bucket',
  'gcra',
]
