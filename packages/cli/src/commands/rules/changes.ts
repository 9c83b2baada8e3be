import { type LiveRules, loadRules, type Rule, type RulesOptions } from '@tollgate/core'
import { blockText } from '../../format.js'
import { type RuleJson, ruleJson, sameRule } from '../../rule-json.js'

/** One rule of a file against the live rules: what publishing the file would do to it. */
export interface RuleChange {
  rule: string
  change: 'added' | 'changed' | 'unchanged'
  /**
   * `'kept'`: the rule keeps its state (counts, buckets) under the same key; `'fresh'`: a new rule,
   * or one whose algorithm or periods (for buckets, limits) change, starts from nothing.
   */
  state: 'kept' | 'fresh'
  before: RuleJson | null
  after: RuleJson
}

export interface Changes {
  /** The file's rules, as `publish` takes them. */
  readonly options: RulesOptions
  readonly entries: RuleChange[]
  /** The rules that differ: what a publish sends. */
  readonly changed: RulesOptions
}

/**
 * The file's rules against the set in force: resolved both ways by LiveRules itself (`preview`),
 * which checks them as a publish would and names each rule's state as every process will.
 */
export function changesOf(live: LiveRules, file: string): Changes {
  const options = loadRules(file)
  const before = live.preview()
  const after = live.preview(options)
  const changed: Record<string, RulesOptions[string]> = Object.create(null)
  const entries = Object.keys(options).map((name): RuleChange => {
    const next = after.get(name) as Rule
    const previous = before.get(name)
    const change = previous === undefined ? 'added' : sameRule(previous, next) ? 'unchanged' : 'changed'
    if (change !== 'unchanged') changed[name] = options[name] as RulesOptions[string]
    return {
      rule: name,
      change,
      state: previous?.stateName === next.stateName ? 'kept' : 'fresh',
      before: previous === undefined ? null : ruleJson(previous),
      after: ruleJson(next),
    }
  })
  return { options, entries, changed }
}

/** What differs between two versions of a rule, field by field: `windows 600/1m → 1000/1m`. */
export function fieldChanges(
  before: RuleJson,
  after: RuleJson,
  windows: (rule: Pick<RuleJson, 'windows'>) => string,
): string[] {
  const fields: string[] = []
  const show = (value: unknown) => (value === null ? '-' : String(value))
  if (before.algorithm !== after.algorithm) fields.push(`algorithm ${before.algorithm} → ${after.algorithm}`)
  if (windows(before) !== windows(after)) fields.push(`windows ${windows(before)} → ${windows(after)}`)
  if (before.parent !== after.parent) fields.push(`parent ${show(before.parent)} → ${show(after.parent)}`)
  if (before.onStoreError !== after.onStoreError) {
    fields.push(`onStoreError ${show(before.onStoreError)} → ${show(after.onStoreError)}`)
  }
  if (before.dryRun !== after.dryRun) fields.push(`dryRun ${show(before.dryRun)} → ${show(after.dryRun)}`)
  const by = (rule: RuleJson) => (rule.by === null ? '-' : `[${rule.by.join(', ')}]`)
  if (by(before) !== by(after)) fields.push(`by ${by(before)} → ${by(after)}`)
  const overrides = (rule: RuleJson) =>
    rule.overrides.map((override) => `${override.key} ${windows(override)}`).join('; ') || '-'
  if (overrides(before) !== overrides(after)) fields.push(`overrides ${overrides(before)} → ${overrides(after)}`)
  const block = (rule: RuleJson) => (rule.block === null ? '-' : blockText(rule.block))
  if (block(before) !== block(after)) fields.push(`block ${block(before)} → ${block(after)}`)
  return fields
}
