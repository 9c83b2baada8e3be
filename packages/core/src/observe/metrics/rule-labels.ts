/** The label every rule past `maxRules` shares. */
export const OTHER_RULES = '__other__'

/**
 * Rule names as labels, bounded: the first `maxRules` names seen are their own labels, every
 * later one is OTHER_RULES, so that rules loaded without end cannot grow the series without end.
 */
export class RuleLabels {
  private readonly labels = new Set<string>()

  constructor(private readonly maxRules: number) {}

  labelOf(name: string): string {
    if (this.labels.has(name)) return name
    if (this.labels.size >= this.maxRules || name === OTHER_RULES) return OTHER_RULES
    this.labels.add(name)
    return name
  }
}

/** A window's label: its period in seconds, `60s` for a minute, `0.5s` for 500 ms. */
export function windowLabel(periodMs: number): string {
  return `${periodMs / 1000}s`
}
