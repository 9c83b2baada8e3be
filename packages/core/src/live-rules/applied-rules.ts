import type { RulesOptions, WarningHandler } from '../rules/rules.js'
import { ListenerFailure } from './listener-failure.js'
import { type AppliedStored, applyStored, type Overrides, type StoredRule } from './overrides.js'
import type { RulesStamp } from './redis-rules.js'
import { LiveRuleSet } from './rule-set.js'
import type { RuleRejection, RulesFollower } from './source.js'
import type { LiveWindowLists } from './window-lists.js'

/** A rule set every follower took: one resolution per follower, in the order they were asked. */
export interface CheckedSet {
  readonly set: LiveRuleSet
  readonly followers: readonly RulesFollower[]
  readonly resolved: readonly unknown[]
}

/**
 * The rule set in force in this process: which one (its epoch, and the id of the publish that
 * made it), since when, the stored rules it would not take, and the followers (limiters) it goes
 * to. A set goes to no follower before every follower took it.
 */
export class AppliedRules {
  private readonly followers = new Set<RulesFollower>()
  /** Checks rule sets, and gives their warnings, while no limiter follows. */
  private readonly unfollowed: RulesFollower<Array<[string, string]>>
  private readonly warned = new Set<string>()
  private readonly rejections = new Map<string, RuleRejection>()
  private set: LiveRuleSet
  private epochHeld = 0
  /** The id of the publish that made the epoch held; undefined when not known (a snapshot that does not say). */
  private publishId: string | undefined = ''
  private at = Date.now()

  constructor(
    defaults: RulesOptions,
    private readonly names: LiveWindowLists,
    private readonly onWarning: WarningHandler,
  ) {
    this.set = LiveRuleSet.of(defaults, names)
    this.unfollowed = {
      resolve: (set) => {
        const warnings: Array<[string, string]> = []
        // Without defaults, dropping every override leaves no rule: no limiter here to refuse that.
        if (!set.isEmpty) set.resolve((message, code) => warnings.push([message, code]), false)
        return warnings
      },
      apply: (warnings) => {
        for (const [message, code] of warnings ?? []) this.warnOnce(message, code)
      },
      reject: () => {},
    }
  }

  get epoch(): number {
    return this.epochHeld
  }

  /** What to read Redis from: the rule set held, or none (epoch 0) when which publish made it is not known. */
  get stamp(): RulesStamp {
    return this.publishId === undefined ? { epoch: 0, id: '' } : { epoch: this.epochHeld, id: this.publishId }
  }

  get appliedAtMs(): number {
    return this.at
  }

  get ruleSet(): LiveRuleSet {
    return this.set
  }

  get overrides(): Overrides {
    return this.set.overrides
  }

  get options(): RulesOptions {
    return this.set.options
  }

  get rejected(): RuleRejection[] {
    return [...this.rejections.values()]
  }

  /** True when `stamp` is the rule set held. */
  holds(stamp: RulesStamp): boolean {
    return stamp.epoch === this.epochHeld && stamp.id === this.publishId
  }

  /** Which publish made the epoch held is not known (a snapshot that does not say): the next read reads every rule. */
  forgetPublish(): void {
    this.publishId = undefined
  }

  follow(follower: RulesFollower): () => void {
    this.followers.add(follower)
    return () => this.followers.delete(follower)
  }

  /** The followers' resolutions of `set`; throws TG_CONFIG for one they cannot take. */
  check(set: LiveRuleSet): CheckedSet {
    const followers = this.followers.size > 0 ? [...this.followers] : [this.unfollowed as RulesFollower]
    return { set, followers, resolved: followers.map((follower) => follower.resolve(set, this.names)) }
  }

  /** True while `checked` was checked by every follower there is now. */
  isCurrent(checked: CheckedSet): boolean {
    const { followers } = checked
    if (this.followers.size === 0) return followers.length === 1 && followers[0] === this.unfollowed
    return followers.length === this.followers.size && followers.every((follower) => this.followers.has(follower))
  }

  /**
   * Applies rules read at `stamp` (every rule Redis holds when `whole`): those a follower cannot
   * take are rejected and keep their last good version, and the epoch moves on even past them,
   * so that they are not read again. A listener that throws does so once every follower has the
   * rules.
   */
  applyRead(stamp: RulesStamp, stored: readonly StoredRule[], whole: boolean): void {
    const rules = whole ? withDropped(stored, this.set.overrides, stamp.epoch) : stored
    const applied = applyStored(this.set.overrides, rules, (overrides, changed) =>
      this.check(this.set.next(overrides, changed)),
    )
    this.take(stamp, applied.resolved, applied)
  }

  /** Applies `checked`, the set of a publish that made `stamp`, which changed the rules `changed`. */
  applyPublished(stamp: RulesStamp, checked: CheckedSet, changed: readonly string[]): void {
    this.take(stamp, checked, { changed, accepted: [...changed], rejections: [] })
  }

  private take(
    stamp: RulesStamp,
    checked: CheckedSet | undefined,
    outcome: Pick<AppliedStored<unknown>, 'accepted' | 'rejections'> & { readonly changed: readonly string[] },
  ): void {
    // A snapshot that did not say which publish made its epoch is the same epoch, not a new one.
    const moved = stamp.epoch !== this.epochHeld || (this.publishId !== undefined && stamp.id !== this.publishId)
    this.publishId = stamp.id
    // A listener that throws must not keep the others from the new rules: it throws after them.
    const failure = new ListenerFailure()
    if (checked !== undefined) this.set = checked.set
    for (const rule of outcome.accepted) this.rejections.delete(rule)
    for (const rejection of outcome.rejections) {
      this.rejections.set(rejection.rule, rejection)
      this.onWarning(
        `live rules: rule '${rejection.rule}' stored at epoch ${rejection.epoch} is rejected, its last good version stays: ${rejection.message}`,
        'TG_RULES_REJECTED',
      )
      for (const follower of this.followers) failure.catch(() => follower.reject(rejection))
    }
    if (!moved && outcome.changed.length === 0) {
      failure.rethrow()
      return
    }
    this.epochHeld = stamp.epoch
    this.at = Date.now()
    const change = { epoch: stamp.epoch, changed: [...outcome.changed] }
    const followers = checked?.followers ?? (this.followers.size > 0 ? [...this.followers] : [this.unfollowed])
    followers.forEach((follower, i) => {
      // A follower added since the check resolves the rules when it starts following.
      if (!this.followers.has(follower) && follower !== this.unfollowed) return
      failure.catch(() => follower.apply(checked?.resolved[i], change))
    })
    failure.rethrow()
  }

  private warnOnce(message: string, code: string): void {
    if (this.warned.has(message)) return
    this.warned.add(message)
    this.onWarning(message, code)
  }
}

/** A read of every rule: an override it does not name is gone. */
function withDropped(stored: readonly StoredRule[], overrides: Overrides, epoch: number): StoredRule[] {
  const rules = [...stored]
  const named = new Set(rules.map((rule) => rule.rule))
  for (const name of overrides.keys()) if (!named.has(name)) rules.push({ rule: name, text: null, epoch })
  return rules
}
