import type { LiveResolution, Window } from '../rules/rules.js'

/**
 * One `windows` array per distinct list of windows among the rules live rules resolve, so that
 * stores which key what they keep by a rule's windows (a HybridStore's shapes) see a rule that
 * did not change as the same.
 */
export class LiveWindowLists implements LiveResolution {
  private readonly windowLists = new Map<string, readonly Window[]>()

  windowsOf(windows: readonly Window[]): readonly Window[] {
    const text = JSON.stringify(windows)
    const known = this.windowLists.get(text)
    if (known) return known
    this.windowLists.set(text, windows)
    return windows
  }
}
