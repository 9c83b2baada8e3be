import { ALGORITHMS, type AlgorithmName, MAX_RULE_NAME_LENGTH } from '../rules/rules.js'
import { textDigest } from '../support/digest.js'
import { formatDuration, parseDuration } from '../support/duration.js'

/** The name inline windows that do not hold up are checked under, so the error names them plainly. */
const UNCHECKED_INLINE = 'inline'

/** What the names of inline windows start with: headers name their windows by what they admit instead (policyName). */
export const INLINE_RULE_PREFIX = 'inline:'

/**
 * The rule name of inline `windows` given no `rule`: `inline:<algorithm>:<limit>/<period>,…`,
 * windows in order of period, e.g. `inline:sliding-log:5/3s,20/1m`. Derived from what the
 * windows count, never from where they are used, so keys stay the same across restarts: two
 * middlewares with the same windows and algorithm share one count per client, and two with
 * different ones never do. A name past the bound on rule names keeps its algorithm and a digest.
 */
export function inlineRuleName(windows: unknown, algorithm: unknown = 'sliding-log'): string {
  if (!ALGORITHMS.includes(algorithm as AlgorithmName) || !Array.isArray(windows)) return UNCHECKED_INLINE
  const counted: Array<{ limit: number; periodMs: number }> = []
  for (const window of windows as unknown[]) {
    const { limit, period } = (window ?? {}) as { limit?: unknown; period?: unknown }
    const periodMs = parseDuration(period)
    if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit <= 0 || typeof periodMs === 'string') {
      return UNCHECKED_INLINE
    }
    counted.push({ limit, periodMs })
  }
  counted.sort((a, b) => a.periodMs - b.periodMs)
  const name = `${INLINE_RULE_PREFIX}${algorithm}:${counted.map((w) => `${w.limit}/${formatDuration(w.periodMs)}`).join(',')}`
  return name.length <= MAX_RULE_NAME_LENGTH ? name : `${INLINE_RULE_PREFIX}${algorithm}:#${textDigest(name)}`
}

/**
 * A route's own name for its inline windows, e.g. `POST /upload`: as it is when it fits the bound
 * on rule names, else its start and a digest of the whole, so that long URLs still differ.
 */
export function routeRuleName(routeId: string): string {
  if (routeId.length <= MAX_RULE_NAME_LENGTH) return routeId
  const digest = `#${textDigest(routeId)}`
  return `${routeId.slice(0, MAX_RULE_NAME_LENGTH - digest.length)}${digest}`
}
