import type { RuleOptions } from '../rules/rules.js'

/** A rule's override: its options and their JSON, as stored. */
export interface Override {
  readonly options: RuleOptions
  readonly text: string
}

/** The overrides in force, by rule name. A rule without one runs its default. */
export type Overrides = ReadonlyMap<string, Override>
