export function integer(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '–'
}

export function decimal(value: number, digits = 2): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '–'
}

export function ratio(value: number): string {
  return Number.isFinite(value) ? `×${value.toFixed(2)}` : '–'
}

/** Half the min–max range as a share of the median: how much the repetitions disagreed. */
export function spread(values: readonly number[], middle: number): string {
  if (values.length < 2 || !Number.isFinite(middle) || middle === 0) return ''
  return `±${Math.round(((Math.max(...values) - Math.min(...values)) / 2 / middle) * 100)}%`
}

export function table(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  align?: readonly ('l' | 'r')[],
): string {
  const rule = head.map((_, i) => ((align?.[i] ?? 'l') === 'r' ? '---:' : '---'))
  return [head, rule, ...rows].map((row) => `| ${row.join(' | ')} |`).join('\n')
}
