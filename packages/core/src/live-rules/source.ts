import type { LiveResolution, RulesOptions } from '../rules/rules.js'
import type { RuleRejection } from './rule-rejection.js'
import type { LiveRuleSet } from './rule-set.js'

/** A new rule set applied: the epoch it is at, and the rules whose options changed with it. */
export interface RulesChange {
  /** @example 42 */
  readonly epoch: number
  /** Rules added, changed or returned to their default; empty when the epoch moved over changes that were all rejected. */
  readonly changed: readonly string[]
}

export type { RuleRejection }

/**
 * Something that follows live rules (a limiter): how it resolves a rule set, which throws
 * `TG_CONFIG` when it cannot take it, and where the resolved set goes once every follower took it.
 */
export interface RulesFollower<Resolved = unknown> {
  /**
   * `rules.resolve(warn, dryRun)` resolves the set as resolveRules would, only what changed
   * resolved again; `live` is the resolution it resolves with.
   */
  resolve(rules: LiveRuleSet, live: LiveResolution): Resolved
  /** `resolved` is undefined when the epoch moved but no rule changed. */
  apply(resolved: Resolved | undefined, change: RulesChange): void
  reject(rejection: RuleRejection): void
}

/** What a limiter sees of a LiveRules, kept off its public face. */
export interface LiveRulesSource {
  /** The rule set in force: the defaults with the overrides applied. */
  readonly options: RulesOptions
  readonly resolution: LiveResolution
  /** The key holding the epoch, for a store that reads it on a round trip of its own. */
  readonly epochKey: string
  /** An epoch read from `epochKey` elsewhere: a refresh follows when it moved, and the poll skips its read. */
  noteEpoch(epoch: number): void
  /** Starts sending rule sets to `follower`; the function returned stops it. */
  follow(follower: RulesFollower): () => void
}

const sources = new WeakMap<object, LiveRulesSource>()

export function registerLiveSource(owner: object, source: LiveRulesSource): void {
  sources.set(owner, source)
}

/** The source behind a LiveRules given where rules go, or undefined for anything else. */
export function liveSourceOf(value: unknown): LiveRulesSource | undefined {
  return typeof value === 'object' && value !== null ? sources.get(value) : undefined
}
