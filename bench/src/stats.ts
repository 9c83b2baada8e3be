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
