import type { RuleOptions } from '../rules/rules.js'
import { TollgateArgumentError } from '../support/errors.js'
import { isPlainObject } from '../support/option-objects.js'
import { HISTORY_LENGTH } from './redis-rules.js'

/** One rule's change in a published version. */
export interface RuleVersion {
  readonly rule: string
  /** The options published; null: the override was dropped and the rule went back to its default. */
  readonly options: RuleOptions | null
  /**
   * The rule's override before: null when it had none (its default ran); a string when what was
   * stored was not JSON (written around the API), as it was.
   */
  readonly previous: RuleOptions | string | null
}

/** One publish: the epoch it made, when, and the rules it changed. */
export interface RulesVersion {
  /** @example 42 */
  readonly epoch: number
  /** When Redis ran the publish (its clock), in ms since the Unix epoch. */
  readonly publishedAtMs: number
  /** Set when the publish was `rollback(epoch)`: the epoch whose rule set it published again. */
  readonly rollbackOf?: number
  readonly changes: readonly RuleVersion[]
}

/** A history entry as publish_rules.lua writes it; undefined for one that is not (written around the API). */
export function versionOf(text: string): RulesVersion | undefined {
  let entry: unknown
  try {
    entry = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isPlainObject(entry) || !Number.isSafeInteger(entry.epoch) || !Array.isArray(entry.changes)) return undefined
  const changes: RuleVersion[] = []
  for (const change of entry.changes as unknown[]) {
    if (!isPlainObject(change) || typeof change.rule !== 'string') return undefined
    const options = optionsOf(change.options)
    if (typeof options === 'string') return undefined
    changes.push({ rule: change.rule, options, previous: optionsOf(change.previous) })
  }
  return {
    epoch: entry.epoch as number,
    publishedAtMs: Number(entry.publishedAtMs),
    ...(Number.isSafeInteger(entry.rollbackOf) ? { rollbackOf: entry.rollbackOf as number } : {}),
    changes,
  }
}

function optionsOf(text: unknown): RuleOptions | string | null {
  if (typeof text !== 'string') return null
  try {
    return JSON.parse(text) as RuleOptions
  } catch {
    return text
  }
}

/**
 * The changes that bring the rules at `current` back to what they were at `target`: every rule
 * a later version changed gets the override it had before the earliest of them. Every epoch
 * after `target` must be in the history, or the set at `target` cannot be known.
 */
export function rollbackChanges(
  versions: readonly RulesVersion[],
  target: number,
  current: number,
): Array<[string, RuleOptions | string | null]> {
  const after = versions.filter((version) => version.epoch > target && version.epoch <= current)
  const held = new Set(after.map((version) => version.epoch))
  const missing: number[] = []
  for (let epoch = target + 1; epoch <= current && missing.length < 5; epoch++)
    if (!held.has(epoch)) missing.push(epoch)
  if (missing.length > 0) {
    const oldest = Math.min(...versions.map((version) => version.epoch))
    throw new TollgateArgumentError(
      versions.length >= HISTORY_LENGTH && (missing[0] as number) < oldest
        ? `cannot roll back to epoch ${target}: the history keeps the last ${HISTORY_LENGTH} versions, from epoch ${oldest}`
        : `cannot roll back to epoch ${target}: epoch ${missing.join(', ')} is not in the history (written around LiveRules), so the rule set of epoch ${target} is not known`,
    )
  }
  const changes = new Map<string, RuleOptions | string | null>()
  // Newest first: the earliest version's `previous` is set last and stays.
  for (const version of [...after].sort((a, b) => b.epoch - a.epoch)) {
    for (const change of version.changes) changes.set(change.rule, change.previous)
  }
  return [...changes]
}
