import { type Rule, type RuleOptions, resolveRules } from '../rules/rules.js'
import { describeValue, TollgateArgumentError, TollgateConfigError, TollgateError } from '../support/errors.js'
import { checkOptionsObject, isPlainObject, optionKeys } from '../support/option-objects.js'
import { AppliedRules } from './applied-rules.js'
import { type RulesVersion, rollbackChanges, versionOf } from './history.js'
import { type LiveRulesOptions, liveRulesConfigOf } from './options.js'
import { changesOf, storedChangesOf, unstored } from './overrides.js'
import { publishIdOf, publishPayloadOf, RedisRules } from './redis-rules.js'
import { closedError, RulesReader } from './rules-reader.js'
import { type RuleRejection, registerLiveSource } from './source.js'
import { LiveWindowLists } from './window-lists.js'

export interface PublishOptions {
  /**
   * Publish only if the rules are still at this epoch (compare-and-set): a publish that finds
   * another throws a `TG_CONFLICT` error and writes nothing. Without it, a publish that races
   * another is checked again on top of it and retried.
   * @default undefined (on top of whatever epoch is current)
   * @example { expectedEpoch: liveRules.epoch }
   */
  expectedEpoch?: number
}

/** Where this process's live rules stand. */
export interface LiveRulesStatus {
  /** The epoch applied: how many publishes the rules in force include. 0: none, the defaults (or a snapshot's). */
  readonly epoch: number
  /** When this process applied that epoch (ms since the Unix epoch). */
  readonly appliedAtMs: number
  /** True from the start until a read of Redis succeeds, and again whenever the last read failed. */
  readonly stale: boolean
  /** Stored rules this process would not apply, each rule's last rejection; their last good versions run. */
  readonly rejected: readonly RuleRejection[]
}

const PUBLISH_KEYS = optionKeys<PublishOptions>({ expectedEpoch: true })
/** Publishes that race others are checked again on top of them this many times before giving up. */
const PUBLISH_ATTEMPTS = 5

const noop = () => {}

/**
 * Rules the whole fleet can change while it runs, without a restart: `publish` validates a
 * change as `createLimiter` would and stores it in Redis under a new epoch, and every process
 * applies it within about a round trip (a Pub/Sub nudge), or at its next poll if the nudge was
 * lost. Decisions never wait on Redis for their rules. A rule without an override runs its
 * default; `rollback` publishes an earlier epoch's rule set again. See docs/live-rules.md.
 * @example
 * const rules = new LiveRules({ client: redis, defaults: { api: { windows: [{ limit: 100, period: '1m' }] } } })
 * const limiter = createLimiter({ rules, store: new RedisStore({ client: redis }) })
 * await rules.publish({ api: { windows: [{ limit: 500, period: '1m' }] } })
 */
export class LiveRules {
  private readonly redis: RedisRules
  private readonly names: LiveWindowLists
  private readonly applied: AppliedRules
  private readonly reader: RulesReader
  private readonly closeClient: (() => Promise<void>) | undefined

  constructor(options: LiveRulesOptions) {
    const config = liveRulesConfigOf(options)
    this.closeClient = config.closeClient
    // Checked here, so that a bad default fails at construction. A process that only administers
    // published rules (the tollgate CLI) may have no defaults.
    if (!hasNoRules(config.defaults)) resolveRules(config.defaults, noop, false)
    this.names = new LiveWindowLists()
    this.applied = new AppliedRules(config.defaults, this.names, config.onWarning)
    this.redis = new RedisRules(config.connection, config.prefix)
    this.reader = new RulesReader(config, this.redis, this.applied)

    const { applied, reader } = this
    registerLiveSource(this, {
      get options() {
        return applied.options
      },
      resolution: this.names,
      epochKey: this.redis.keys.epoch,
      noteEpoch: (epoch) => reader.noteEpoch(epoch),
      follow: (follower) => applied.follow(follower),
    })
    reader.start()
  }

  /** The epoch applied: how many publishes the rules in force include. */
  get epoch(): number {
    return this.applied.epoch
  }

  /**
   * The key holding the epoch (`<prefix>{rules}:epoch`): a component that reads it on a round
   * trip of its own (a store's sync, say) hands what it read to `noteEpoch`.
   */
  get epochKey(): string {
    return this.redis.keys.epoch
  }

  /**
   * Changes rules for every process: each rule named gets these options, or with `null` goes back
   * to its default (a rule with no default is removed). The whole rule set after the change is
   * checked first, as `createLimiter` checks rules (and as each limiter following these rules in
   * this process resolves them: its `dryRun`, its store's algorithms); an invalid change throws a
   * `TollgateConfigError` (`TG_CONFIG`) and writes nothing. The changes apply together, under one
   * new epoch; the promise resolves once this process applied it. Redis failures reject with
   * `TG_STORE`.
   * @example await liveRules.publish({ 'api.search': { windows: [{ limit: 20, period: '1m' }] }, 'api.export': null })
   * @example await liveRules.publish(loadRules('rules.yaml'), { expectedEpoch: 41 })
   */
  async publish(
    changes: Readonly<Record<string, RuleOptions | null>>,
    options: PublishOptions = {},
  ): Promise<{ epoch: number }> {
    const { expectedEpoch } = checkOptionsObject(options, PUBLISH_KEYS, 'publish options', {
      Failure: TollgateArgumentError,
    })
    if (expectedEpoch !== undefined && !isEpoch(expectedEpoch)) {
      throw new TollgateArgumentError(
        `publish option expectedEpoch must be an epoch (an integer ≥ 0), got ${describeValue(expectedEpoch)}`,
      )
    }
    return this.publishChanges(changesOf(changes), expectedEpoch, '')
  }

  /**
   * The rule set `publish(changes)` would put in force, checked as `publish` checks it and
   * resolved, writing nothing and reading nothing (`refresh()` first to preview against the latest
   * epoch); without changes, the rule set in force. Each rule carries its `stateName`: a rule whose `stateName` would change starts fresh
   * (docs/live-rules.md, "What keeps counts and what starts fresh"). Throws what `publish` would
   * (`TG_CONFIG`).
   * @example const next = liveRules.preview(loadRules('limits.yaml'))
   */
  preview(changes: Readonly<Record<string, RuleOptions | null>> = {}): ReadonlyMap<string, Rule> {
    const raw = isPlainObject(changes) && Object.keys(changes).length === 0 ? [] : changesOf(changes)
    const set = this.applied.ruleSet.with(raw.map(([name, options]) => [name, unstored(options)] as const))
    this.applied.check(set)
    if (set.isEmpty) return new Map()
    // A limiter's own dryRun only decides whether the set is valid for it, which the check above
    // asked every follower; the rules come out the same either way. With every follower in dry
    // run, a set valid for them all may still fail the check without it.
    try {
      return set.resolve(noop, false)
    } catch {
      return set.resolve(noop, true)
    }
  }

  /**
   * Reads Redis now: the rules changed since the ones this process holds, or every rule when
   * Redis no longer holds those (a publish lost). Resolves once they are applied; rejects
   * (`TG_STORE`) when Redis cannot be read, as the poll never does.
   */
  refresh(): Promise<void> {
    return this.reader.refresh()
  }

  /**
   * An epoch read elsewhere, from `epochKey`: when it is not the one applied, or while the last
   * read of these live rules failed, a refresh follows (its failure is warned of, never thrown).
   */
  noteEpoch(epoch: number): void {
    this.reader.noteEpoch(epoch)
  }

  status(): LiveRulesStatus {
    return {
      epoch: this.applied.epoch,
      appliedAtMs: this.applied.appliedAtMs,
      stale: this.reader.isStale,
      rejected: this.applied.rejected,
    }
  }

  /**
   * The versions published, newest first: the last 200 publishes, or those of them that changed
   * `rule`.
   * @example (await liveRules.history('api'))[0]?.changes
   */
  async history(rule?: string): Promise<RulesVersion[]> {
    if (rule !== undefined && typeof rule !== 'string') {
      throw new TollgateArgumentError(`history takes a rule name, got ${describeValue(rule)}`)
    }
    const versions = (await this.redis.history()).map(versionOf).filter((version) => version !== undefined)
    return rule === undefined ? versions : versions.filter((v) => v.changes.some((change) => change.rule === rule))
  }

  /**
   * Publishes the rule set as it was at `epoch` again, as a new epoch: every rule changed since
   * gets back the override it had then (or none). `epoch` must be within the history (the last 200
   * publishes). The set is checked as any publish is.
   * @example await liveRules.rollback(41)
   */
  async rollback(epoch: number): Promise<{ epoch: number }> {
    if (!isEpoch(epoch)) {
      throw new TollgateArgumentError(`rollback takes an epoch (an integer ≥ 0), got ${describeValue(epoch)}`)
    }
    for (let attempt = 1; ; attempt++) {
      await this.refresh()
      const current = this.applied.epoch
      if (epoch === current) return { epoch }
      if (epoch > current) {
        throw new TollgateArgumentError(`cannot roll back to epoch ${epoch}: the rules are at epoch ${current}`)
      }
      const changes = rollbackChanges(await this.history(), epoch, current)
      try {
        return await this.publishChanges(changes, current, `,"rollbackOf":${epoch}`)
      } catch (error) {
        if (!(error instanceof TollgateError && error.code === 'TG_CONFLICT') || attempt === PUBLISH_ATTEMPTS)
          throw error
      }
    }
  }

  /**
   * Stops polling and listening; limiters following these rules keep the last ones applied.
   * Waits for a read or snapshot under way. Closes the client only with `closeClient`.
   */
  async close(): Promise<void> {
    await this.reader.close()
    await this.closeClient?.()
  }

  private async publishChanges(
    raw: ReadonlyArray<readonly [string, unknown]>,
    expected: number | undefined,
    historyFields: string,
  ): Promise<{ epoch: number }> {
    if (this.reader.isClosed) throw closedError()
    // The rules the caller saw: an expected epoch that another publish made again is not those.
    const seen = this.applied.stamp
    const { changes, faithful, unstorable } = storedChangesOf(raw)
    // Checked before any I/O, so that an invalid change fails at once; as given when JSON would
    // drop or alter a value (a function), so that it is refused for that, not stored as nothing.
    if (!faithful) {
      this.applied.check(this.applied.ruleSet.with(raw.map(([name, options]) => [name, unstored(options)] as const)))
    }
    if (changes === undefined) {
      throw new TollgateConfigError(`publish takes rule options that JSON can hold; ${unstorable}`)
    }
    const payload = publishPayloadOf(changes)
    let checkedOn = this.applied.ruleSet
    let checked = this.applied.check(checkedOn.with(changes))
    const changed = changes.map(([name]) => name)
    for (let attempt = 1; ; attempt++) {
      await this.refresh()
      const base = this.applied.stamp
      if (expected !== undefined && (base.epoch !== expected || (seen.epoch === expected && seen.id !== base.id))) {
        throw conflictError(expected, base.epoch)
      }
      // Checked again only on rules that changed meanwhile, or for a limiter that began following them.
      if (this.applied.ruleSet !== checkedOn || !this.applied.isCurrent(checked)) {
        checkedOn = this.applied.ruleSet
        checked = this.applied.check(checkedOn.with(changes))
      }
      const id = publishIdOf()
      const done = this.reader.publishingAs(id)
      try {
        const reply = await this.redis.publish(base, id, payload, historyFields)
        if (reply.published) {
          await this.reader.published({ epoch: reply.epoch, id }, base, checkedOn, checked, changed)
          return { epoch: reply.epoch }
        }
        if (expected !== undefined || attempt === PUBLISH_ATTEMPTS) throw conflictError(base.epoch, reply.found)
      } finally {
        done()
      }
    }
  }
}

function hasNoRules(rules: unknown): boolean {
  return isPlainObject(rules) && Object.keys(rules).length === 0
}

function isEpoch(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

function conflictError(expected: number, found: number): TollgateError {
  return new TollgateError(
    'TG_CONFLICT',
    found === expected
      ? `the live rules at epoch ${found} are not the ones this publish was checked on: another publish made epoch ${found} (the one this process read was lost in a failover, say); nothing was written`
      : `the live rules are at epoch ${found}, not ${expected}: another publish came first; nothing was written`,
  )
}
