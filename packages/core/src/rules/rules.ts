import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, isPlainObject, optionKeys } from '../support/option-objects.js'
import type { WarningHandler } from '../support/process-warning.js'
import { ALGORITHMS, type AlgorithmName } from './algorithm-name.js'
import { type BlockOptions, blockOf, type RuleBlock } from './block.js'
import { chargedByOf } from './charged-by.js'
import { IdentifierOverrides, type OverridesOptions } from './identifier-overrides.js'
import { stateNameOf } from './state-name.js'
import { type StoreErrorPolicy, storeErrorPolicyOf } from './store-error-policy.js'
import {
  MAX_WINDOWS_PER_RULE,
  resolveWindows,
  type Window,
  type WindowOptions,
  warnOnWindowsThatNeverBind,
} from './windows.js'

export type { BlockOptions, RuleBlock } from './block.js'
export type { OverrideOptions, OverridesOptions } from './identifier-overrides.js'
export type { AlgorithmName, Window, WindowOptions }
export { ALGORITHMS, MAX_WINDOWS_PER_RULE }

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
  /**
   * The kinds of identifier the rule is charged on: the part before `:` of `'user:42'`,
   * `'org:acme'`, `'ip:203.0.113.7'`. A decision charges the rule (as a parent too) only for its
   * identifiers of these kinds, so that each level of a hierarchy counts its own: a user rule by
   * `user`, its parent by `org`, theirs by nothing. `[]` is one count every caller shares (a
   * global limit). A decision that gives none of the kinds fails (`TG_INVALID_ARGUMENT`), since
   * the rule could not be charged.
   * @default every identifier the decision gives
   * @example { windows: [{ limit: 5, period: '1m' }], by: ['org'], parent: 'global' }
   */
  by?: readonly string[]
  /**
   * Windows that replace the rule's for some identifiers: a paying customer at 5×, a test key at
   * 1. A key is an identifier (`'org:acme'`) or a pattern where `*` stands for any characters
   * (`'user:*-test'`). An exact key wins over any pattern; among patterns, the one with the most
   * characters besides `*` wins, and among those the first listed. Changed by live rules like any
   * option, they cost a decision no Redis command.
   * @example { 'org:acme': { windows: [{ limit: 500, period: '1m' }] }, 'user:*-test': { windows: [{ limit: 1, period: '1m' }] } }
   */
  overrides?: OverridesOptions
  /**
   * Lockout after refusals (brute-force protection): once the rule's windows have refused an
   * identifier `after` times (each within the rule's longest period of the first), the identifier
   * is refused for `for` with reason `'blocked'`, whatever its windows hold; `factor` multiplies
   * the next block of the same identifier while its last is remembered, up to `max`. Checked and
   * counted in the same atomic decision; `limiter.reset` lifts a block. Stores that hold blocks:
   * MemoryStore and RedisStore.
   * @example { windows: [{ limit: 5, period: '15m' }], block: { for: '15m', after: 1, factor: 2, max: '1d' } }
   */
  block?: BlockOptions
}

export type RulesOptions = Readonly<Record<string, RuleOptions>>

export interface Rule {
  readonly name: string
  readonly algorithm: AlgorithmName
  readonly windows: readonly Window[]
  readonly parent: string | undefined
  readonly onStoreError: StoreErrorPolicy | undefined
  /** The rule's own `dryRun`; undefined: the limiter's. */
  readonly dryRun: boolean | undefined
  /** The identifier kinds it is charged on; undefined: every identifier given, `[]`: one shared count. */
  readonly by: readonly string[] | undefined
  /** Windows for some identifiers in place of `windows`; undefined when it has none. */
  readonly overrides: IdentifierOverrides | undefined
  /** Its lockout; undefined when it has none. */
  readonly block: RuleBlock | undefined
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

/** Bounds that keep one decision a single, small script call (and MAX_WINDOWS_PER_RULE). */
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
  by: true,
  overrides: true,
  block: true,
})

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
    drafts.set(name, resolveRule(name, options[name], warn, live))
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
    warnOnWindowsThatNeverBind(`rule ${q(rule.name)}`, rule.algorithm, rule.windows, warn)
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

function resolveRule(name: string, raw: unknown, warn: WarningHandler, live?: LiveResolution): RuleDraft {
  if (name.length === 0) throw new TollgateConfigError('a rule name must not be empty')
  if (name.length > MAX_RULE_NAME_LENGTH) {
    throw new TollgateConfigError(
      `rule ${describeValue(name)} is ${name.length} characters long; a rule name takes at most ${MAX_RULE_NAME_LENGTH}, since every response's headers carry it`,
    )
  }
  const where = `rule ${q(name)}`
  const options = checkOptionsObject(raw, RULE_KEYS, where, { shape: 'with windows' })

  const given = options.algorithm ?? 'sliding-log'
  // The list's own text rather than the one given (read from a file, say): a decision compares
  // it with a store's last one, by reference only when both are interned (support/interned.ts).
  const algorithm = ALGORITHMS.find((name) => name === given)
  if (algorithm === undefined) {
    throw new TollgateConfigError(
      `${where}: unknown algorithm ${describeValue(given)}; use one of ${ALGORITHMS.map(q).join(', ')}`,
    )
  }
  const parent = options.parent
  if (parent !== undefined && (typeof parent !== 'string' || parent.length === 0)) {
    throw new TollgateConfigError(`${where}: parent must be a rule name, got ${describeValue(parent)}`)
  }

  const resolved = resolveWindows(options.windows, where, warn)
  const windows = live ? live.windowsOf(resolved) : resolved
  const onStoreError =
    options.onStoreError === undefined
      ? undefined
      : storeErrorPolicyOf(options.onStoreError, TollgateConfigError, `${where}: onStoreError`)
  const { dryRun } = options
  if (dryRun !== undefined && typeof dryRun !== 'boolean') {
    throw new TollgateConfigError(`${where}: dryRun must be a boolean, got ${describeValue(dryRun)}`)
  }
  const by = options.by === undefined ? undefined : chargedByOf(options.by, where)
  const overrides =
    options.overrides === undefined
      ? undefined
      : IdentifierOverrides.of(options.overrides, { name, algorithm, where }, warn, live)
  const block = options.block === undefined ? undefined : blockOf(options.block, where)
  return { name, algorithm, windows, parent, onStoreError, dryRun, by, overrides, block }
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

export function gcd(a: number, b: number): number {
  let x = a
  let y = b
  while (y !== 0) [x, y] = [y, x % y]
  return x
}

function q(name: string): string {
  return `'${name}'`
}
