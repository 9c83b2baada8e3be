import { createHash } from 'node:crypto'
import { interned } from '../support/interned.js'

/** The part of a rule (`Rule`) its state's name is made of. */
export interface RuleShape {
  readonly algorithm: string
  readonly windows: ReadonlyArray<{ readonly limit: number; readonly periodMs: number }>
}

/**
 * What a rule's kept state means: its algorithm and periods, and for a bucket its limits too.
 * A counter's state is counts per period, which a new limit reads as they are; a bucket's state
 * is a fill level in units of 1/(period / gcd(limit, period)) token (algorithms/bucket.ts), which
 * mean something else once the limit changes.
 */
export function shapeOf(rule: RuleShape): string {
  const bucket = rule.algorithm === 'token-bucket' || rule.algorithm === 'gcra'
  const windows = rule.windows.map((window) => (bucket ? `${window.limit}/${window.periodMs}` : `${window.periodMs}`))
  return `${rule.algorithm} ${windows.join(' ')}`
}

/**
 * The name a rule's state is kept under, in a store's keys (`Rule.stateName`, and the `rule` of a
 * `StoreTarget`): `name@<digest of its shape>` (four characters), for tools that address a rule's keys themselves. Two
 * rules of one name and different shapes never share state, whether the shape changed in code or
 * by live rules: a process still on a rule's old period would otherwise read the new window's
 * state as its own and end it at its own period (a deploy from 5 per second to 5 per hour once let
 * 30 through in 6 s), and a one-window state in Redis holds no period
 * (lua/lib/counter_state.lua). A counter's limit is not part of its shape: a limit raised or
 * lowered keeps the counts.
 * @example stateNameOf({ name: 'api', algorithm: 'fixed-window', windows }) // 'api@M86G'
 */
export function stateNameOf(rule: RuleShape & { readonly name: string }): string {
  // 24 bits in four base64url characters: enough to tell apart the few shapes one rule takes over
  // its life, and short enough that a one-window counter's key stays in Redis's smallest
  // allocation for it (test/tests/redis-compact-state.test.ts holds it there).
  // Interned: a decision compares it to a store's last rule every time (support/interned.ts).
  return interned(`${rule.name}@${createHash('sha256').update(shapeOf(rule)).digest('base64url').slice(0, 4)}`)
}

/** Whether `stateName` names a state of the rule called `name` (its own shape's or an override's). */
export function isStateOf(stateName: string, name: string): boolean {
  return stateName.length === name.length + 5 && stateName.startsWith(name) && stateName[name.length] === '@'
}
