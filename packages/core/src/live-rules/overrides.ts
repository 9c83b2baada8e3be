import type { RuleOptions, RulesOptions } from '../rules/rules.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { isPlainObject } from '../support/option-objects.js'
import { ChangedOverrides } from './changed-overrides.js'
import type { Override, Overrides } from './override.js'
import type { RuleRejection } from './rule-rejection.js'

export type { Override, Overrides }

/** A rule as read from where overrides are kept: its JSON, or null for no override. */
export interface StoredRule {
  readonly rule: string
  readonly text: string | null
  /** The epoch that stored it. */
  readonly epoch: number
}

/** The rule set in force: the defaults, each overridden rule replaced, the rules only overrides hold added. */
export function mergedRules(defaults: RulesOptions, overrides: Overrides): RulesOptions {
  // No prototype, so that a rule named '__proto__' is a rule like any other.
  const merged: Record<string, RuleOptions> = Object.create(null)
  for (const name of Object.keys(defaults)) merged[name] = defaults[name] as RuleOptions
  for (const [name, override] of overrides) merged[name] = override.options
  return merged
}

/** The overrides with `changes` made: options to set, null to drop. Copies the changes, not the overrides. */
export function withChanges(
  overrides: Overrides,
  changes: ReadonlyArray<readonly [string, Override | null]>,
): Overrides {
  return ChangedOverrides.of(overrides, changes)
}

/** An override of these options, its text the JSON that is stored. */
export function overrideOf(options: RuleOptions): Override {
  return { options, text: JSON.stringify(options) }
}

/**
 * A publish's changes as they are stored and read back: JSON's reading of each rule's options
 * (which a valid rule's options survive unchanged), and that JSON. `faithful` is false when JSON
 * drops or alters a value given (a function, undefined, NaN, a Date); `changes` is undefined,
 * and `unstorable` says why, when JSON cannot hold a rule's options at all (a BigInt, a cycle).
 */
export function storedChangesOf(
  raw: ReadonlyArray<readonly [string, unknown]>,
):
  | { changes: Array<readonly [string, Override | null]>; faithful: boolean; unstorable?: undefined }
  | { changes: undefined; faithful: false; unstorable: string } {
  const changes: Array<readonly [string, Override | null]> = []
  let faithful = true
  for (const [name, options] of raw) {
    if (options === null) {
      changes.push([name, null])
      continue
    }
    let text: string | undefined
    try {
      text = JSON.stringify(options)
    } catch (error) {
      return { changes: undefined, faithful: false, unstorable: `rule '${name}': ${(error as Error).message}` }
    }
    if (text === undefined) {
      return { changes: undefined, faithful: false, unstorable: `rule '${name}': ${describeValue(options)}` }
    }
    const read = JSON.parse(text) as RuleOptions
    faithful &&= survivesJson(options, read)
    changes.push([name, { options: read, text }])
  }
  return { changes, faithful }
}

/**
 * True when `read` (JSON's reading of `given`) holds what `given` holds: no function, undefined,
 * non-finite number or object of a class that JSON would drop or turn into something else.
 */
export function survivesJson(given: unknown, read: unknown): boolean {
  if (typeof given !== 'object' || given === null) return given === read
  if (typeof read !== 'object' || read === null) return false
  if (Array.isArray(given)) {
    return Array.isArray(read) && given.length === read.length && given.every((item, i) => survivesJson(item, read[i]))
  }
  if (!isPlainObject(given) || !isPlainObject(read)) return false
  const keys = Object.keys(given)
  return keys.length === Object.keys(read).length && keys.every((key) => survivesJson(given[key], read[key]))
}

export interface AppliedStored<Resolved> {
  /** The base itself when nothing changed. */
  readonly overrides: Overrides
  /** Rules whose override was set, changed or dropped. */
  readonly changed: string[]
  /** Rules whose stored version is now in force (or was already). */
  readonly accepted: string[]
  readonly rejections: RuleRejection[]
  /** What `check` answered for the overrides returned, when any changed. */
  readonly resolved: Resolved | undefined
}

/**
 * The overrides with stored rules applied, as far as they make a valid rule set: `check` throws
 * for a set it cannot take, and is told which rules the set changed. All at once when they can
 * be (one publish's changes may depend on each other: a rule and the new parent it names); else
 * one by one, as many passes as accept another, so that a stored rule that cannot be taken is left
 * out alone, its last good version kept, and every set in between was valid.
 */
export function applyStored<Resolved>(
  base: Overrides,
  stored: readonly StoredRule[],
  check: (overrides: Overrides, changed: readonly string[]) => Resolved,
): AppliedStored<Resolved> {
  const rejections: RuleRejection[] = []
  const accepted: string[] = []
  let pending: Array<{ change: readonly [string, Override | null]; epoch: number; message: string }> = []
  for (const { rule, text, epoch } of stored) {
    const override = text === null ? null : parsed(text)
    if (typeof override === 'string') {
      rejections.push({ rule, epoch, message: override })
      continue
    }
    const current = base.get(rule)
    if (override === null ? current === undefined : current?.text === override.text) accepted.push(rule)
    else pending.push({ change: [rule, override], epoch, message: '' })
  }

  let overrides: Overrides = base
  // Pending changes all differ from the base: those taken are the rules changed.
  const changed: string[] = []
  let resolved: Resolved | undefined
  const all = pending.map((entry) => entry.change)
  try {
    if (pending.length > 0) {
      const next = withChanges(base, all)
      resolved = check(
        next,
        all.map(([name]) => name),
      )
      overrides = next
    }
    for (const entry of pending) changed.push(entry.change[0])
    pending = []
  } catch {
    for (let progress = true; progress && pending.length > 0; ) {
      progress = false
      for (const entry of [...pending]) {
        const next = withChanges(overrides, [entry.change])
        try {
          resolved = check(next, [...changed, entry.change[0]])
        } catch (error) {
          entry.message = (error as Error).message
          continue
        }
        overrides = next
        changed.push(entry.change[0])
        pending.splice(pending.indexOf(entry), 1)
        progress = true
      }
    }
  }
  for (const name of changed) accepted.push(name)
  for (const entry of pending) rejections.push({ rule: entry.change[0], epoch: entry.epoch, message: entry.message })
  const order = new Map(stored.map((rule, i) => [rule.rule, i]))
  rejections.sort((a, b) => (order.get(a.rule) as number) - (order.get(b.rule) as number))
  changed.sort((a, b) => (order.get(a) as number) - (order.get(b) as number))
  return { overrides, changed, accepted, rejections, resolved: changed.length > 0 ? resolved : undefined }
}

/** The override a stored text holds, or why it holds none. */
function parsed(text: string): Override | string {
  let options: unknown
  try {
    options = JSON.parse(text)
  } catch (error) {
    return `the stored options are not JSON: ${(error as Error).message}`
  }
  // Checked when the rule set is resolved, which names the rule and what is wrong; the text is
  // made canonical here, so that equal options compare equal however they were written.
  return overrideOf(options as RuleOptions)
}

/** A publish's changes: each rule's options, or null to drop its override. Values are checked with the rule set. */
export function changesOf(changes: unknown): Array<readonly [string, unknown]> {
  if (!isPlainObject(changes)) {
    throw new TollgateConfigError(
      `publish takes an object mapping rule names to rule options (or null), got ${describeValue(changes)}`,
    )
  }
  const names = Object.keys(changes)
  if (names.length === 0) throw new TollgateConfigError('publish takes at least one rule to change, got none')
  return names.map((name) => [name, changes[name]] as const)
}

/** Options as given, to be checked before they are stored. */
export function unstored(options: unknown): Override | null {
  return options === null ? null : { options: options as RuleOptions, text: '' }
}
