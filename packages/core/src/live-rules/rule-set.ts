import { type Rule, type RuleOptions, type RulesOptions, resolveRules, type WarningHandler } from '../rules/rules.js'
import { TollgateConfigError } from '../support/errors.js'
import { isPlainObject } from '../support/option-objects.js'
import { mergedRules, type Override, type Overrides, withChanges } from './overrides.js'
import type { LiveWindowLists } from './window-lists.js'

/** A rule set resolved: its rules, and by rule name the rules that name it as their parent. */
interface Resolved {
  readonly rules: ReadonlyMap<string, Rule>
  readonly children: ReadonlyMap<string, readonly string[]>
  /** What rulesWhere found, by test. */
  readonly found: Map<(rule: Rule) => boolean, ReadonlySet<Rule>>
}

/** What a set made by a change resolves again. */
interface Delta {
  /** The rules the change set or dropped, and their descendants, that the set still holds. */
  readonly affected: readonly string[]
  /** The rules the change dropped that the set no longer holds. */
  readonly removed: readonly string[]
  /** The affected rules and every rule up their parent chains, as resolveRules takes them. */
  readonly subset: RulesOptions
}

/**
 * One rule set of live rules: the defaults with the overrides applied. Followers resolve it as
 * they would resolve rules given to createLimiter, with their own dryRun and warnings, and get
 * the same rules; but a set made from another by a few changes resolves again only the rules
 * the change touched: those it set or dropped, and every rule whose parent chain runs through
 * one of them. Every other rule is the other set's own object, unchanged, so that one changed
 * rule among tens of thousands costs a follower that rule, not the whole set.
 */
export class LiveRuleSet {
  private resolved: Resolved | undefined
  /**
   * The resolved set this one was made from, and the rules it changed, until this one is
   * resolved; undefined: resolve every rule.
   */
  private change: { readonly base: Resolved; readonly changed: readonly string[] } | undefined
  /** Kept once made: every follower checks the same rules by its own dryRun. */
  private delta: Delta | undefined
  /** What rulesWhere found in the set this one was made from. */
  private readonly foundBefore: Resolved['found'] | undefined
  private merged: RulesOptions | undefined

  private constructor(
    private readonly defaults: RulesOptions,
    private readonly hasDefaults: boolean,
    private readonly names: LiveWindowLists,
    readonly overrides: Overrides,
    base: LiveRuleSet | undefined,
    changed: readonly string[],
  ) {
    // Only a resolved set is worth starting from: an unresolved one resolves every rule.
    this.change = base?.resolved === undefined ? undefined : { base: base.resolved, changed }
    this.foundBefore = base?.resolved?.found
  }

  /** The defaults alone. */
  static of(defaults: RulesOptions, names: LiveWindowLists): LiveRuleSet {
    return new LiveRuleSet(defaults, Object.keys(defaults).length > 0, names, new Map(), undefined, [])
  }

  /** This set with `changes` made: options to set, null to drop. */
  with(changes: ReadonlyArray<readonly [string, Override | null]>): LiveRuleSet {
    return this.next(
      withChanges(this.overrides, changes),
      changes.map(([name]) => name),
    )
  }

  /** The set of `overrides`, which differ from this set's in the rules `changed` names at most. */
  next(overrides: Overrides, changed: readonly string[]): LiveRuleSet {
    return new LiveRuleSet(this.defaults, this.hasDefaults, this.names, overrides, this, changed)
  }

  /** True when the set holds no rule: no defaults, no overrides. */
  get isEmpty(): boolean {
    return !this.hasDefaults && this.overrides.size === 0
  }

  /** The set as createLimiter takes rules, made on first use: a rule by name, defaults first. */
  get options(): RulesOptions {
    this.merged ??= mergedRules(this.defaults, this.overrides)
    return this.merged
  }

  /**
   * The set resolved as `resolveRules(this.options, warn, dryRun, names)` would resolve it, and
   * throwing what it would throw (TG_CONFIG); `warn` hears what it would say of the rules
   * resolved again. The rules are the same for every `dryRun`, which only decides what is valid.
   */
  resolve(warn: WarningHandler, dryRun: boolean): ReadonlyMap<string, Rule> {
    const delta = this.deltaOf()
    if (delta === undefined) {
      const rules = resolveRules(this.options, warn, dryRun, this.names)
      this.resolved ??= { rules, children: childrenOf(rules), found: new Map() }
      return this.resolved.rules
    }
    const fresh = delta.affected.length === 0 ? undefined : this.resolveSubset(delta, warn, dryRun)
    if (this.resolved === undefined) {
      const base = (this.change as NonNullable<LiveRuleSet['change']>).base
      const rules = rulesAfter(base, delta, fresh)
      if (rules.size === 0) throw new TollgateConfigError('option rules must hold at least one rule')
      this.resolved = { rules, children: childrenAfter(base, delta, rules), found: new Map() }
      // Not kept: the set in force would hold the one before it too.
      this.change = undefined
    }
    return this.resolved.rules
  }

  /**
   * The rules of the resolved set that pass `test`, a test of the rule alone: kept by `test`, and
   * for a set made by a change, the other set's found again only among the rules resolved again.
   * @example liveRuleSet.rulesWhere(sheds)
   */
  rulesWhere(test: (rule: Rule) => boolean): ReadonlySet<Rule> {
    const resolved = this.resolved
    if (resolved === undefined) throw new Error('rulesWhere needs the set resolved first')
    const known = resolved.found.get(test)
    if (known !== undefined) return known
    const before = this.foundBefore?.get(test)
    const found = new Set<Rule>()
    if (this.delta === undefined || before === undefined) {
      for (const rule of resolved.rules.values()) if (test(rule)) found.add(rule)
    } else {
      const redone = new Set([...this.delta.affected, ...this.delta.removed])
      for (const rule of before) if (!redone.has(rule.name)) found.add(rule)
      for (const name of this.delta.affected) {
        const rule = resolved.rules.get(name) as Rule
        if (test(rule)) found.add(rule)
      }
    }
    resolved.found.set(test, found)
    return found
  }

  private resolveSubset(delta: Delta, warn: WarningHandler, dryRun: boolean): ReadonlyMap<string, Rule> {
    try {
      return resolveRules(delta.subset, warn, dryRun, this.names)
    } catch (error) {
      // Several rules may fail: the one to name is the one a resolution of the whole set meets
      // first, and it meets rules in the set's order. Only a failure pays for finding that order.
      const base = this.change?.base
      if (base === undefined) throw error
      const ordered: Record<string, RuleOptions> = Object.create(null)
      for (const name of base.rules.keys()) if (name in delta.subset) ordered[name] = delta.subset[name] as RuleOptions
      for (const name of this.change?.changed ?? [])
        if (name in delta.subset) ordered[name] ??= delta.subset[name] as RuleOptions
      resolveRules(ordered, () => {}, dryRun, this.names)
      throw error
    }
  }

  private deltaOf(): Delta | undefined {
    if (this.delta !== undefined || this.change === undefined) return this.delta
    const { base, changed } = this.change
    // The changed rules and their descendants: the chains that run through a changed rule.
    const touched = new Set(changed)
    const queue = [...changed]
    for (let i = 0; i < queue.length; i++) {
      for (const child of base.children.get(queue[i] as string) ?? []) {
        if (touched.has(child)) continue
        touched.add(child)
        queue.push(child)
      }
    }
    const affected: string[] = []
    const removed: string[] = []
    // No prototype, so that a rule named '__proto__' is a rule like any other.
    const subset: Record<string, RuleOptions> = Object.create(null)
    for (const name of touched) {
      if (this.optionsOf(name) === undefined) {
        removed.push(name)
        continue
      }
      affected.push(name)
      // Up the parent chain as far as it goes, so that resolveRules checks it whole: a parent
      // missing, a cycle, a chain too long, a parent in dry run.
      for (let current: string | undefined = name; current !== undefined && !(current in subset); ) {
        const options: RuleOptions | undefined = this.optionsOf(current)
        if (options === undefined) break
        subset[current] = options
        const parent: unknown = isPlainObject(options) ? options.parent : undefined
        current = typeof parent === 'string' ? parent : undefined
      }
    }
    this.delta = { affected, removed, subset }
    return this.delta
  }

  private optionsOf(name: string): RuleOptions | undefined {
    const override = this.overrides.get(name)
    if (override !== undefined) return override.options
    return Object.hasOwn(this.defaults, name) ? this.defaults[name] : undefined
  }
}

/** The base's rules with the affected ones replaced by their new resolution, every chain linking the rules of the result. */
function rulesAfter(
  base: Resolved,
  delta: Delta,
  fresh: ReadonlyMap<string, Rule> | undefined,
): ReadonlyMap<string, Rule> {
  const rules = new Map(base.rules)
  for (const name of delta.removed) rules.delete(name)
  const made: Array<{ chain: readonly Rule[] }> = []
  for (const name of delta.affected) {
    const rule = { ...(fresh?.get(name) as Rule) }
    rules.set(name, rule)
    made.push(rule)
  }
  for (const rule of made) rule.chain = rule.chain.map((link) => rules.get(link.name) as Rule)
  return rules
}

function childrenOf(rules: ReadonlyMap<string, Rule>): Map<string, readonly string[]> {
  const children = new Map<string, string[]>()
  for (const rule of rules.values()) {
    if (rule.parent === undefined) continue
    const siblings = children.get(rule.parent)
    if (siblings === undefined) children.set(rule.parent, [rule.name])
    else siblings.push(rule.name)
  }
  return children
}

/** The base's children, moved for the rules whose parent the change replaced: the lists of other parents are shared. */
function childrenAfter(
  base: Resolved,
  delta: Delta,
  rules: ReadonlyMap<string, Rule>,
): ReadonlyMap<string, readonly string[]> {
  const children = new Map(base.children)
  const moved = (name: string, before: string | undefined, after: string | undefined) => {
    if (before === after) return
    if (before !== undefined) {
      const left = (children.get(before) ?? []).filter((child) => child !== name)
      if (left.length === 0) children.delete(before)
      else children.set(before, left)
    }
    if (after !== undefined) children.set(after, [...(children.get(after) ?? []), name])
  }
  for (const name of delta.affected) moved(name, base.rules.get(name)?.parent, rules.get(name)?.parent)
  for (const name of delta.removed) moved(name, base.rules.get(name)?.parent, undefined)
  return children
}
