import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, isPlainObject, optionKeys } from '../support/option-objects.js'
import type { WarningHandler } from '../support/process-warning.js'
import type { AlgorithmName } from './algorithm-name.js'
import { stateNameOf } from './state-name.js'
import { resolveWindows, type Window, type WindowOptions, warnOnWindowsThatNeverBind } from './windows.js'

/** The windows one override gives its identifiers in place of the rule's. */
export interface OverrideOptions {
  /** @example [{ limit: 500, period: '1m' }] */
  windows: readonly WindowOptions[]
}

/** Keyed by an identifier (`'org:acme'`) or a pattern in which `*` stands for any characters (`'user:*-test'`). */
export type OverridesOptions = Readonly<Record<string, OverrideOptions>>

/** One override, resolved. */
export interface IdentifierOverride {
  /** The identifier or pattern, as written. */
  readonly key: string
  readonly windows: readonly Window[]
  /**
   * Where its identifiers' state lives: the rule's name and the digest of these windows' shape
   * (state-name.ts), so that an identifier moved to a limit of the same periods keeps its counts.
   */
  readonly stateName: string
}

/**
 * Bounds on one rule's overrides. Exact keys are found by a Map lookup, so thousands cost a
 * decision nothing; each pattern is tried in turn, so they are few. Larger sets belong in a
 * rule per plan, chosen per request (the adapters' `rule` option).
 */
export const MAX_EXACT_OVERRIDES = 10_000
export const MAX_PATTERN_OVERRIDES = 64
const MAX_KEY_LENGTH = 1_024

const OVERRIDE_KEYS = optionKeys<OverrideOptions>({ windows: true })

/** What an override needs of its rule. */
export interface OverriddenRule {
  readonly name: string
  readonly algorithm: AlgorithmName
  /** The rule, as errors name it. */
  readonly where: string
}

/** `*`-patterns are matched by the parts between their stars, never by a regular expression: no input can make one backtrack. */
interface Pattern {
  readonly parts: readonly string[]
  readonly override: IdentifierOverride
}

/** A rule's `overrides`: exact identifiers first, then patterns, most specific first. */
export class IdentifierOverrides {
  private constructor(
    private readonly exact: ReadonlyMap<string, IdentifierOverride>,
    private readonly patterns: readonly Pattern[],
    /** Every override, in the order written. */
    readonly list: readonly IdentifierOverride[],
  ) {}

  static of(
    raw: unknown,
    rule: OverriddenRule,
    warn: WarningHandler,
    live?: { windowsOf(windows: readonly Window[]): readonly Window[] },
  ): IdentifierOverrides {
    const { where } = rule
    if (!isPlainObject(raw)) {
      throw new TollgateConfigError(
        `${where}: overrides must be an object mapping identifiers or patterns to { windows }, got ${describeValue(raw)}`,
      )
    }
    const exact = new Map<string, IdentifierOverride>()
    const patterns: Array<Pattern & { specificity: number; order: number }> = []
    const list: IdentifierOverride[] = []
    // One array and state name per distinct list of windows: ten thousand customers on three
    // plans are three shapes to a store that keys by windows (a HybridStore's).
    const known = new Map<string, { windows: readonly Window[]; stateName: string }>()
    for (const key of Object.keys(raw)) {
      const at = `${where}, override '${key}'`
      checkKey(key, where)
      const options = checkOptionsObject(raw[key], OVERRIDE_KEYS, at, { shape: '{ windows }' })
      const resolved = resolveWindows(options.windows, at, warn)
      warnOnWindowsThatNeverBind(at, rule.algorithm, resolved, warn)
      const text = JSON.stringify(resolved)
      let shared = known.get(text)
      if (shared === undefined) {
        const windows = live ? live.windowsOf(resolved) : resolved
        shared = { windows, stateName: stateNameOf({ name: rule.name, algorithm: rule.algorithm, windows }) }
        known.set(text, shared)
      }
      const override: IdentifierOverride = { key, windows: shared.windows, stateName: shared.stateName }
      list.push(override)
      if (!key.includes('*')) {
        exact.set(key, override)
        continue
      }
      const parts = key.split('*')
      const specificity = key.length - (parts.length - 1)
      patterns.push({ parts, override, specificity, order: patterns.length })
    }
    if (exact.size > MAX_EXACT_OVERRIDES) {
      throw new TollgateConfigError(
        `${where}: ${exact.size} overrides of single identifiers is more than the maximum of ${MAX_EXACT_OVERRIDES}; give plans their own rules and choose one per request`,
      )
    }
    if (patterns.length > MAX_PATTERN_OVERRIDES) {
      throw new TollgateConfigError(
        `${where}: ${patterns.length} override patterns is more than the maximum of ${MAX_PATTERN_OVERRIDES}, since a decision tries each in turn`,
      )
    }
    patterns.sort((a, b) => b.specificity - a.specificity || a.order - b.order)
    return new IdentifierOverrides(exact, patterns, list)
  }

  /** The override this identifier's windows come from; undefined: the rule's own. */
  of(identifier: string): IdentifierOverride | undefined {
    const exact = this.exact.get(identifier)
    if (exact !== undefined) return exact
    for (const pattern of this.patterns) {
      if (matches(pattern.parts, identifier)) return pattern.override
    }
    return undefined
  }
}

function checkKey(key: string, where: string): void {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw new TollgateConfigError(
      `${where}: an override's key must be an identifier or pattern of 1 to ${MAX_KEY_LENGTH} characters, got ${describeValue(key)}`,
    )
  }
  if (/^\*+$/.test(key)) {
    throw new TollgateConfigError(
      `${where}: override '${key}' matches every identifier; set the rule's windows instead`,
    )
  }
}

/**
 * Whether `text` matches a pattern split at its stars: the first part a prefix, the last a
 * suffix, those between found in order, each at its leftmost place (which, for `*` alone, is
 * never wrong). Linear in the text per part.
 */
function matches(parts: readonly string[], text: string): boolean {
  const first = parts[0] as string
  const last = parts[parts.length - 1] as string
  if (text.length < first.length + last.length) return false
  if (!text.startsWith(first) || !text.endsWith(last)) return false
  let at = first.length
  const end = text.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] as string
    if (part.length === 0) continue
    const found = text.indexOf(part, at)
    if (found < 0 || found + part.length > end) return false
    at = found + part.length
  }
  return true
}
