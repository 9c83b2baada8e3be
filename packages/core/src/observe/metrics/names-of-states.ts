import type { Rule } from '../../rules/rules.js'

/** State names remembered; past it, the oldest go. */
const MAX_STATE_NAMES = 10_000

/**
 * Rule names by the state names (`name@digest`, rules/state-name.ts) of the rules decided on: a store
 * counts by state name (a HybridStore's `overAdmittedByRule`), and what is shown to users is
 * labelled by rule name. Each publish that reshapes a rule names a new state, so the oldest are
 * forgotten first.
 */
export class NamesOfStates {
  private readonly names = new Map<string, string>()

  /** Remembers the state names of the rule and of each parent it charges, their overrides' too. */
  note(rule: Rule): void {
    for (const link of rule.chain) {
      this.remember(link.stateName, link.name)
      for (const override of link.overrides?.list ?? []) this.remember(override.stateName, link.name)
    }
  }

  private remember(stateName: string, name: string): void {
    if (this.names.size >= MAX_STATE_NAMES && !this.names.has(stateName)) {
      this.names.delete(this.names.keys().next().value as string)
    }
    this.names.set(stateName, name)
  }

  /** The name of the rule whose state this is, or the state name itself for a rule never noted. */
  nameOf(stateName: string): string {
    return this.names.get(stateName) ?? stateName
  }
}
