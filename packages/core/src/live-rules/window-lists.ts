import { createHash } from 'node:crypto'
import type { LiveResolution, Rule, RuleDraft, Window } from '../rules.js'

/**
 * What a rule's kept state means: its algorithm and periods, and for a bucket its limits too.
 * A counter's state is counts per period, which a new limit reads as they are; a bucket's state
 * is a fill level in units of 1/(period / gcd(limit, period)) token (algorithms/bucket.ts), which
 * mean something else once the limit changes.
 */
export function shapeOf(rule: Pick<RuleDraft, 'algorithm' | 'windows'>): string {
  const bucket = rule.algorithm === 'token-bucket' || rule.algorithm === 'gcra'
  const windows = rule.windows.map((window) => (bucket ? `${window.limit}/${window.periodMs}` : `${window.periodMs}`))
  return `${rule.algorithm} ${windows.join(' ')}`
}

/**
 * Names for the state of live rules, and one `windows` array per distinct list of windows.
 *
 * A rule of its default's shape keeps its state under its name, so that a limit raised or
 * lowered keeps the counts; a rule of any other shape (or with no default) keeps it under
 * `name@<digest of the shape>`, so that windows of another period or algorithm start empty, on
 * every store: a one-window state in Redis holds no period (lua/lib/counter_state.lua), and would
 * otherwise be read as the new window's. A shape seen before finds the state it left, if that
 * has not expired.
 */
export class LiveStateNames implements LiveResolution {
  private readonly defaultShapes: ReadonlyMap<string, string>
  private readonly windowLists = new Map<string, readonly Window[]>()

  constructor(defaults: ReadonlyMap<string, Rule>) {
    this.defaultShapes = new Map([...defaults.values()].map((rule) => [rule.name, shapeOf(rule)]))
  }

  stateNameOf(draft: RuleDraft): string {
    const shape = shapeOf(draft)
    if (this.defaultShapes.get(draft.name) === shape) return draft.name
    return `${draft.name}@${createHash('sha256').update(shape).digest('hex').slice(0, 10)}`
  }

  windowsOf(windows: readonly Window[]): readonly Window[] {
    const text = JSON.stringify(windows)
    const known = this.windowLists.get(text)
    if (known) return known
    this.windowLists.set(text, windows)
    return windows
  }
}
