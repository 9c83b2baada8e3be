export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
}

export function min(values: readonly number[]): number {
  return Math.min(...values)
}

export function max(values: readonly number[]): number {
  return Math.max(...values)
}

/** Rotates `items` by `by`, so that each repetition starts with another contender and drift spreads over all of them. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  if (items.length === 0) return []
  const shift = by % items.length
  return [...items.slice(shift), ...items.slice(0, shift)]
}

/** The value at quantile `q` (0 to 1) of `values`, by the nearest rank below, as the latency measure takes it. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number
}
