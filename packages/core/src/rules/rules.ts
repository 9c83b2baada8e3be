import { type Duration, parseDuration } from '../support/duration.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, isPlainObject, optionKeys } from '../support/option-objects.js'
import type { WarningHandler } from '../support/process-warning.js'
import { stateNameOf } from './state-name.js'
import { type StoreErrorPolicy, storeErrorPolicyOf } from './store-error-policy.js'

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

export interface WindowOptions {
  /**
   * Units admitted per `period`: requests, or whatever `cost` counts (bytes, tokens…).
   * @example 20
   */
  limit: number
  /**
   * The window's length: milliseconds as a number, or a number and a unit, such as `'500ms'`,
   * `'3s'`, `'1m'`, `'15 minutes'`, `'1h'`, `'1 day'` (see `Duration`). A number is milliseconds
   * here but seconds in a rules file, so a number under 1000 warns (`TG_PERIOD_IN_MS`): write
   * `'500ms'` to mean it.
   * @example '60s'
   */
  period: Duration
  /**
   * Load shedding between `lowBurst` and `limit`: a request that fits, leaving the window's use
   * at u units after its cost, is refused with reason `shed` with probability
   * (u − lowBurst) ÷ (limit − lowBurst) when u > lowBurst, so that a key's admitted rate falls
   * off linearly as it nears the limit instead of stopping dead there. An integer from 0 to
   * `limit` − 1. A shed request charges nothing; its `retryAfterMs` is the time until the window's
   * use after its cost would be back at `lowBurst`. See the README's "Shedding".
   * @default undefined (no shedding: admitted up to the limit)
   * @example { limit: 100, period: '1m', lowBurst: 50 }
   */
  lowBurst?: number
}

export interface RuleOptions {
  /**
   * How the windows count.
   * @default 'sliding-log'
   */
  algorithm?: AlgorithmName
  /**
   * Every window must admit a request for it to pass; a refused request charges none of them.
   * @example [{ limit: 20, period: '60s' }, { limit: 5, period: '3s' }]
   */
  windows: readonly WindowOptions[]
  /**
   * A rule whose windows are checked and charged together with this one's, for the same
   * identifiers, in the same atomic decision (and so on up its own parents).
   * @example 'api'
   */
  parent?: string
  /**
   * This rule's policy when the store fails, over the limiter's: a login rule may fail closed
   * while the rest of the API fails open.
   * @default the limiter's onStoreError
   */
  onStoreError?: StoreErrorPolicy
  /**
   * Shadow mode (Envoy's `shadow_mode`): this rule's decisions never refuse. One that would is
   * allowed with reason `dry-run` and `retryAfterMs` 0, its windows still marking which one
   * refused, and charges nothing. A decision's `dryRun` option overrides it; it overrides the
   * limiter's `dryRun`. It covers the rule's decisions, parents' windows included; a rule that
   * refuses must therefore not have a parent in dry run (a configuration error), since its
   * decisions would enforce that parent's windows.
   * @default the limiter's dryRun
   * @example { windows: [{ limit: 100, period: '1m' }], dryRun: true }
   */
  dryRun?: boolean
}

export type RulesOptions = Readonly<Record<string, RuleOptions>>

export interface Window {
  readonly limit: number
  readonly periodMs: number
  /** Where shedding starts; absent on a window that does not shed. */
  readonly lowBurst?: number
}

export interface Rule {
  readonly name: string
  readonly algorithm: AlgorithmName
  readonly windows: readonly Window[]
  readonly parent: string | undefined
  readonly onStoreError: StoreErrorPolicy | undefined
  /** The rule's own `dryRun`; undefined: the limiter's. */
  readonly dryRun: boolean | undefined
  /** This rule, then its parent, then the parent's parent: the order decisions report windows in. */
  readonly chain: readonly Rule[]
  /**
   * The name the rule's state is kept under, in a store's keys (`StoreTarget.rule`): its name and
   * a digest of its shape (algorithm, periods, a bucket's limits), so that a rule whose periods
   * change, in code or by live rules (docs/live-rules.md), starts fresh rather than share counts
   * with processes still on the old periods; a counter's limit changed keeps its counts.
   * @example 'api@M86G'
   */
  readonly stateName: string
}

/** A rule as resolved before its parents are: everything but its chain. */
export type RuleDraft = Omit<Rule, 'chain' | 'stateName'>

/**
 * How live rules resolve (live-rules/): one `windows` array per distinct list of windows, so that
 * stores which key what they keep by a rule's windows (a HybridStore's shapes) see a rule that did
 * not change as the same.
 */
export interface LiveResolution {
  windowsOf(windows: readonly Window[]): readonly Window[]
}

/** Bounds that keep one decision a single, small script call. */
export const MAX_WINDOWS_PER_RULE = 8
export const MAX_CHAIN_LENGTH = 8

/** Every response's header fields repeat the rule's name, and HTTP clients cap a field's size (Node's at 16 KiB for all of them). */
export const MAX_RULE_NAME_LENGTH = 128

export type { WarningHandler }

const RULE_KEYS = optionKeys<RuleOptions>({
  algorithm: true,
  windows: true,
  parent: true,
  onStoreError: true,
  dryRun: true,
})
const WINDOW_KEYS = optionKeys<WindowOptions>({ limit: true, period: true, lowBurst: true })

/** `dryRun` is the limiter's, for rules that do not set their own. */
export function resolveRules(
  options: unknown,
  warn: WarningHandler,
  dryRun: boolean,
  live?: LiveResolution,
): ReadonlyMap<string, Rule> {
  if (!isPlainObject(options)) {
    throw new TollgateConfigError(
      `option rules must be an object mapping rule names to rules, got ${describeValue(options)}`,
    )
  }
  const names = Object.keys(options)
  if (names.length === 0) throw new TollgateConfigError('option rules must hold at least one rule')

  const drafts = new Map<string, RuleDraft>()
  for (const name of names) {
    const draft = resolveRule(name, options[name], warn)
    drafts.set(name, live ? { ...draft, windows: live.windowsOf(draft.windows) } : draft)
  }

  const rules = new Map<string, Rule>()
  for (const draft of drafts.values()) {
    const lineage = lineageOf(draft, drafts)
    rules.set(draft.name, { ...draft, chain: [], stateName: stateNameOf(draft) })
    if (lineage.length > MAX_CHAIN_LENGTH) {
      throw new TollgateConfigError(
        `rule ${q(draft.name)}: its parent chain ${lineage.map(q).join(' → ')} is longer than the maximum of ${MAX_CHAIN_LENGTH} rules`,
      )
    }
  }
  for (const rule of rules.values()) {
    const chain = lineageOf(rule, drafts).map((name) => rules.get(name) as Rule)
    ;(rule as { chain: readonly Rule[] }).chain = chain
    rejectEnforcedChildOfDryRun(rule, dryRun)
    warnOnWindowsThatNeverBind(rule, warn)
  }
  return rules
}

/**
 * A decision checks and charges its rule's windows and its parents' as one; in dry run or not,
 * it is all of them. A rule that refuses, under a parent in dry run, would refuse by that
 * parent's windows, which the parent's own decisions never do.
 */
function rejectEnforcedChildOfDryRun(rule: Rule, limiterDryRun: boolean): void {
  if (rule.dryRun ?? limiterDryRun) return
  const shadowed = rule.chain.find((link) => link.dryRun ?? limiterDryRun)
  if (shadowed === undefined) return
  throw new TollgateConfigError(
    `rule ${q(rule.name)} refuses, but its parent ${q(shadowed.name)} is in dry run: a decision of ${q(rule.name)} checks ${q(shadowed.name)}'s windows too and would refuse by them; set dryRun on ${q(rule.name)} as well, or take ${q(shadowed.name)} out of dry run`,
  )
}

function resolveRule(name: string, raw: unknown, warn: WarningHandler): RuleDraft {
  if (name.length === 0) throw new TollgateConfigError('a rule name must not be empty')
  if (name.length > MAX_RULE_NAME_LENGTH) {
    throw new TollgateConfigError(
      `rule ${describeValue(name)} is ${name.length} characters long; a rule name takes at most ${MAX_RULE_NAME_LENGTH}, since every response's headers carry it`,
    )
  }
  const where = `rule ${q(name)}`
  const options = checkOptionsObject(raw, RULE_KEYS, where, { shape: 'with windows' })

  const algorithm = options.algorithm ?? 'sliding-log'
  if (!ALGORITHMS.includes(algorithm as AlgorithmName)) {
    throw new TollgateConfigError(
      `${where}: unknown algorithm ${describeValue(algorithm)}; use one of ${ALGORITHMS.map(q).join(', ')}`,
    )
  }
  const parent = options.parent
  if (parent !== undefined && (typeof parent !== 'string' || parent.length === 0)) {
    throw new TollgateConfigError(`${where}: parent must be a rule name, got ${describeValue(parent)}`)
  }

  const windowsRaw = options.windows
  if (!Array.isArray(windowsRaw) || windowsRaw.length === 0) {
    throw new TollgateConfigError(`${where}: windows must be a non-empty array, got ${describeValue(windowsRaw)}`)
  }
  if (windowsRaw.length > MAX_WINDOWS_PER_RULE) {
    throw new TollgateConfigError(
      `${where}: ${windowsRaw.length} windows is more than the maximum of ${MAX_WINDOWS_PER_RULE}`,
    )
  }
  const windows = windowsRaw.map((window, index) => resolveWindow(window, `${where}, window ${index}`, warn))
  const seen = new Map<number, number>()
  windows.forEach((window, index) => {
    const earlier = seen.get(window.periodMs)
    if (earlier !== undefined) {
      throw new TollgateConfigError(
        `${where}, window ${index}: period ${window.periodMs} ms repeats window ${earlier}'s; merge them into one window with the smaller limit`,
      )
    }
    seen.set(window.periodMs, index)
  })
  const onStoreError =
    options.onStoreError === undefined
      ? undefined
      : storeErrorPolicyOf(options.onStoreError, TollgateConfigError, `${where}: onStoreError`)
  const { dryRun } = options
  if (dryRun !== undefined && typeof dryRun !== 'boolean') {
    throw new TollgateConfigError(`${where}: dryRun must be a boolean, got ${describeValue(dryRun)}`)
  }
  return { name, algorithm: algorithm as AlgorithmName, windows, parent, onStoreError, dryRun }
}

function resolveWindow(raw: unknown, where: string, warn: WarningHandler): Window {
  const { limit, period, lowBurst } = checkOptionsObject(raw, WINDOW_KEYS, where, { shape: '{ limit, period }' })
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit <= 0) {
    throw new TollgateConfigError(`${where}: limit must be a positive integer, got ${describeValue(limit)}`)
  }
  if (
    lowBurst !== undefined &&
    (typeof lowBurst !== 'number' || !Number.isInteger(lowBurst) || lowBurst < 0 || lowBurst >= limit)
  ) {
    throw new TollgateConfigError(
      `${where}: lowBurst must be an integer from 0 to ${limit - 1} (below the limit, ${limit}), got ${describeValue(lowBurst)}`,
    )
  }
  // Any limit up to 2^53 − 1 with any period up to 366 days: the algorithms keep their
  // products exact or, for the largest buckets, within a stated resolution (see bucket.ts).
  const periodMs = parseDuration(period)
  if (typeof periodMs === 'string') throw new TollgateConfigError(`${where}: period ${periodMs}`)
  if (typeof period === 'number' && periodMs < 1_000) {
    warn(
      `${where}: period ${period} is ${period} milliseconds (in code a number is milliseconds; in a rules file, seconds); write '${period}ms' to mean it, or '${period}s' for seconds`,
      'TG_PERIOD_IN_MS',
    )
  }
  // Only a shedding window carries lowBurst: windows without it keep the shape they always had.
  return lowBurst === undefined ? { limit, periodMs } : { limit, periodMs, lowBurst }
}

function lineageOf(rule: RuleDraft, drafts: ReadonlyMap<string, RuleDraft>): string[] {
  const lineage = [rule.name]
  let parent = rule.parent
  while (parent !== undefined) {
    const next = drafts.get(parent)
    if (!next) {
      throw new TollgateConfigError(`rule ${q(lineage[lineage.length - 1] as string)}: unknown parent ${q(parent)}`)
    }
    if (lineage.includes(parent)) {
      throw new TollgateConfigError(`rule ${q(rule.name)}: parent cycle ${[...lineage, parent].map(q).join(' → ')}`)
    }
    lineage.push(parent)
    parent = next.parent
  }
  return lineage
}

/**
 * Warns about a window that provably never refuses anything its neighbour would not:
 * - sliding log: any long period holds at most `short.limit × ceil(long / short)` units, and any
 *   short period lies inside a long one;
 * - fixed windows: the same, but only when the short period divides the long one (otherwise a
 *   short window can straddle two long ones);
 * - buckets: a bucket never empties while its neighbour has room if both its capacity and its
 *   refill rate are at least the neighbour's.
 * The sliding-window counter estimates, so nothing about it is provable this way.
 */
function neverBinds(algorithm: AlgorithmName, short: Window, long: Window): 'short' | 'long' | undefined {
  const ratio = long.periodMs / short.periodMs
  switch (algorithm) {
    case 'sliding-log':
      if (short.limit >= long.limit) return 'short'
      return short.limit * Math.ceil(ratio) <= long.limit ? 'long' : undefined
    case 'fixed-window':
      if (!Number.isInteger(ratio)) return undefined
      if (short.limit >= long.limit) return 'short'
      return short.limit * ratio <= long.limit ? 'long' : undefined
    case 'token-bucket':
    case 'gcra': {
      const shortRate = short.limit * long.periodMs
      const longRate = long.limit * short.periodMs
      if (short.limit >= long.limit && shortRate >= longRate) return 'short'
      return short.limit <= long.limit && shortRate <= longRate ? 'long' : undefined
    }
    default:
      return undefined
  }
}

function warnOnWindowsThatNeverBind(rule: Rule, warn: WarningHandler): void {
  const sorted = [...rule.windows].sort((a, b) => a.periodMs - b.periodMs)
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const short = sorted[i] as Window
      const long = sorted[j] as Window
      const idle = neverBinds(rule.algorithm, short, long)
      if (idle === undefined) continue
      const [never, beside] = idle === 'short' ? [short, long] : [long, short]
      warn(
        `rule ${q(rule.name)}: window ${never.limit} per ${never.periodMs} ms can never bind beside ${beside.limit} per ${beside.periodMs} ms; ${
          idle === 'short'
            ? 'a shorter window needs a smaller limit'
            : 'limit per period must grow as the period shrinks'
        }`,
        'TG_WINDOW_NEVER_BINDS',
      )
    }
  }
}

export function gcd(a: number, b: number): number {
  let x = a
  let y = b
  while (y !== 0) [x, y] = [y, x % y]
  return x
}

function q(name: string): string {
  return `'${name}'`
}
