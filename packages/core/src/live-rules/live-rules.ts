import { describeValue, TollgateArgumentError, TollgateError } from '../errors.js'
import { checkOptionsObject, isPlainObject, optionKeys } from '../option-objects.js'
import { type Rule, type RuleOptions, type RulesOptions, resolveRules } from '../rules.js'
import { type RulesVersion, rollbackChanges, versionOf } from './history.js'
import { ListenerFailure, unlessReported } from './listener-failure.js'
import { type LiveRulesConfig, type LiveRulesOptions, liveRulesConfigOf } from './options.js'
import {
  type AppliedRules,
  applyStored,
  asJson,
  changesOf,
  mergedRules,
  type Overrides,
  overrideOf,
  type StoredRule,
  unstored,
  withChanges,
} from './overrides.js'
import { RedisRules } from './redis-rules.js'
import { readSnapshot, writeSnapshot } from './snapshot.js'
import { type RuleRejection, type RulesFollower, registerLiveSource } from './source.js'
import { LiveStateNames } from './state-names.js'

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
  private readonly config: LiveRulesConfig
  private readonly redis: RedisRules
  private readonly names: LiveStateNames
  private readonly followers = new Set<RulesFollower>()
  /** Checks rule sets, and gives their warnings, while no limiter follows. */
  private readonly unfollowed: RulesFollower<Array<[string, string]>>
  private readonly warned = new Set<string>()
  private overrides: Overrides = new Map()
  private options: RulesOptions
  private held = 0
  private appliedAt = Date.now()
  private stale = true
  private failedReads = 0
  private nudgesLost = false
  private readonly rejections = new Map<string, RuleRejection>()
  private running: Promise<void> | undefined
  private queued: Promise<void> | undefined
  private timer: NodeJS.Timeout | undefined
  private unsubscribe: (() => void) | undefined
  private saving: Promise<void> = Promise.resolve()
  private saved = false
  private closed = false
  /** When an epoch read elsewhere (`noteEpoch`) last came in (wall clock, ms). */
  private notedAt = 0
  /** The epoch is known to have moved (a nudge, noteEpoch, a publish): the next read skips reading it. */
  private moved = false

  constructor(options: LiveRulesOptions) {
    const config = liveRulesConfigOf(options)
    this.config = config
    // A process that only administers published rules (the tollgate CLI) may have no defaults.
    const defaults = hasNoRules(config.defaults) ? new Map<string, Rule>() : resolveRules(config.defaults, noop, false)
    this.names = new LiveStateNames(defaults)
    this.options = mergedRules(config.defaults, this.overrides)
    this.unfollowed = {
      resolve: (rules, live) => {
        const warnings: Array<[string, string]> = []
        // Without defaults, dropping every override leaves no rule: no limiter here to refuse that.
        if (!hasNoRules(rules)) resolveRules(rules, (message, code) => warnings.push([message, code]), false, live)
        return warnings
      },
      apply: (warnings) => {
        for (const [message, code] of warnings ?? []) this.warnOnce(message, code)
      },
      reject: noop,
    }
    this.redis = new RedisRules(config.client, config.prefix)
    if (config.snapshotPath !== undefined) this.loadSnapshot(config.snapshotPath)

    const live = this
    registerLiveSource(this, {
      get options() {
        return live.options
      },
      resolution: this.names,
      epochKey: this.redis.keys.epoch,
      noteEpoch: (epoch) => this.noteEpoch(epoch),
      follow: (follower) => {
        this.followers.add(follower)
        return () => this.followers.delete(follower)
      },
    })
    if (config.nudges) {
      try {
        this.unsubscribe = this.redis.subscribe(
          (epoch) => this.heard(epoch),
          (error) => this.nudgesFailed(error),
        )
      } catch (error) {
        this.nudgesFailed(error as Error)
      }
    }
    this.refresh().catch(unlessReported)
    this.schedule()
  }

  /** The epoch applied: how many publishes the rules in force include. */
  get epoch(): number {
    return this.held
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
    const overrides = withChanges(
      this.overrides,
      raw.map(([name, options]) => [name, unstored(options)] as const),
    )
    this.check(overrides)
    const rules = mergedRules(this.config.defaults, overrides)
    if (hasNoRules(rules)) return new Map()
    // A limiter's own dryRun only decides whether the set is valid for it, which the check above
    // asked every follower; the rules come out the same either way. With every follower in dry
    // run, a set valid for them all may still fail the check without it.
    try {
      return resolveRules(rules, noop, false, this.names)
    } catch {
      return resolveRules(rules, noop, true, this.names)
    }
  }

  /**
   * Reads Redis now: the epoch, and the rules changed since this process's when it moved. Resolves
   * once they are applied; rejects (`TG_STORE`) when Redis cannot be read, as the poll never does.
   */
  refresh(): Promise<void> {
    if (this.closed) return Promise.reject(closedError())
    if (this.running === undefined) return this.startRead()
    // The read in flight may have started before what the caller waits for: one more after it.
    this.queued ??= this.running.then(noop, noop).then(() => {
      this.queued = undefined
      return this.closed ? undefined : this.startRead()
    })
    return this.queued
  }

  /**
   * An epoch read elsewhere, from `epochKey`: when it is not the one applied, a refresh follows
   * (its failure is warned of, never thrown).
   */
  noteEpoch(epoch: number): void {
    // An epoch read elsewhere is as good as the poll's: the poll skips its own read meanwhile.
    this.notedAt = Date.now()
    if (this.closed || epoch === this.held) return
    this.moved = true
    this.refresh().catch(unlessReported)
  }

  status(): LiveRulesStatus {
    return {
      epoch: this.held,
      appliedAtMs: this.appliedAt,
      stale: this.stale,
      rejected: [...this.rejections.values()],
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
      const current = this.held
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
   * Waits for a read or snapshot under way. Never closes the client.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.unsubscribe?.()
    await this.queued?.catch(noop)
    await this.running?.catch(noop)
    await this.saving
  }

  private async publishChanges(
    raw: ReadonlyArray<readonly [string, unknown]>,
    expected: number | undefined,
    historyFields: string,
  ): Promise<{ epoch: number }> {
    if (this.closed) throw closedError()
    // Checked as given on the rules held, so that an invalid change fails before any I/O and a
    // value JSON would drop (a function) is refused, not stored as nothing.
    this.check(
      withChanges(
        this.overrides,
        raw.map(([name, options]) => [name, unstored(options)] as const),
      ),
    )
    const changes = raw.map(([name, options]) => [name, options === null ? null : overrideOf(asJson(options))] as const)
    const texts = changes.map(([name, override]) => [name, override?.text ?? ''] as const)
    for (let attempt = 1; ; attempt++) {
      await this.refresh()
      if (expected !== undefined && this.held !== expected) throw conflictError(expected, this.held)
      const base = this.held
      this.check(withChanges(this.overrides, changes))
      const reply = await this.redis.publish(base, texts, historyFields)
      if (reply.published) {
        // Applied here before resolving; should the read fail, the poll applies it.
        this.moved = true
        await this.refresh().catch(unlessReported)
        return { epoch: reply.epoch }
      }
      if (expected !== undefined || attempt === PUBLISH_ATTEMPTS) throw conflictError(base, reply.found)
    }
  }

  /** The followers' resolutions of the rule set with these overrides; throws TG_CONFIG for one they cannot take. */
  private check(overrides: Overrides, followers = this.currentFollowers()): unknown[] {
    const rules = mergedRules(this.config.defaults, overrides)
    return followers.map((follower) => follower.resolve(rules, this.names))
  }

  private currentFollowers(): RulesFollower[] {
    return this.followers.size > 0 ? [...this.followers] : [this.unfollowed as RulesFollower]
  }

  private startRead(): Promise<void> {
    const run = this.read().finally(() => {
      if (this.running === run) this.running = undefined
    })
    this.running = run
    return run
  }

  private async read(): Promise<void> {
    let reply: Awaited<ReturnType<RedisRules['readSince']>> | undefined
    const moved = this.moved
    this.moved = false
    try {
      if (moved || (await this.redis.epoch()) !== this.held) reply = await this.redis.readSince(this.held)
    } catch (error) {
      this.moved ||= moved
      this.readFailed(error as TollgateError)
      throw error
    }
    if (this.closed) return
    this.stale = false
    if (this.failedReads > 0) {
      this.config.onWarning(
        `live rules are read from Redis again, after ${this.failedReads} failed read${this.failedReads === 1 ? '' : 's'}`,
        'TG_RULES_RECOVERED',
      )
      this.failedReads = 0
    }
    const advanced = reply !== undefined && reply.epoch !== this.held
    try {
      if (reply !== undefined) this.applyRead(reply.epoch, reply.rules, reply.whole)
    } finally {
      const path = this.config.snapshotPath
      if (path !== undefined && (advanced || !this.saved)) this.saveSnapshot(path)
    }
  }

  /** Applies what was read at `epoch`; the epoch moves on even past rules rejected, so that they are not read again. */
  private applyRead(epoch: number, stored: readonly StoredRule[], whole: boolean): void {
    const rules = [...stored]
    if (whole) {
      const named = new Set(rules.map((rule) => rule.rule))
      for (const name of this.overrides.keys()) if (!named.has(name)) rules.push({ rule: name, text: null, epoch })
    }
    const followers = this.currentFollowers()
    const applied = applyStored(this.overrides, rules, (overrides) => this.check(overrides, followers))
    const moved = epoch !== this.held
    // A listener that throws must not keep the others from the new rules: it throws after them.
    const failure = new ListenerFailure()
    this.install(applied, failure)
    if (!moved && applied.changed.length === 0) {
      failure.rethrow()
      return
    }
    this.held = epoch
    this.appliedAt = Date.now()
    const change = { epoch, changed: applied.changed }
    const resolved = applied.resolved as unknown[] | undefined
    followers.forEach((follower, i) => {
      // A follower added since the read began resolves the rules when it starts following.
      if (!this.followers.has(follower) && follower !== this.unfollowed) return
      failure.catch(() => follower.apply(resolved?.[i], change))
    })
    failure.rethrow()
  }

  private install(applied: AppliedRules<unknown>, failure: ListenerFailure): void {
    this.overrides = applied.overrides
    this.options = mergedRules(this.config.defaults, applied.overrides)
    for (const rule of applied.accepted) this.rejections.delete(rule)
    for (const rejection of applied.rejections) {
      this.rejections.set(rejection.rule, rejection)
      this.config.onWarning(
        `live rules: rule '${rejection.rule}' stored at epoch ${rejection.epoch} is rejected, its last good version stays: ${rejection.message}`,
        'TG_RULES_REJECTED',
      )
      for (const follower of this.followers) failure.catch(() => follower.reject(rejection))
    }
  }

  private loadSnapshot(path: string): void {
    let snapshot: ReturnType<typeof readSnapshot>
    try {
      snapshot = readSnapshot(path, this.config.prefix)
    } catch (error) {
      this.config.onWarning(
        `live rules cannot use the snapshot ${path}: ${(error as Error).message}; starting from the defaults`,
        'TG_RULES_SNAPSHOT',
      )
      return
    }
    if (snapshot === undefined) return
    const applied = applyStored(new Map(), snapshot.rules, (overrides) => this.check(overrides))
    this.install(applied, new ListenerFailure())
    this.held = snapshot.epoch
  }

  private saveSnapshot(path: string): void {
    this.saved = true
    const { prefix } = this.config
    const epoch = this.held
    const overrides = this.overrides
    this.saving = this.saving
      .then(() => writeSnapshot(path, prefix, epoch, overrides))
      .catch((error: unknown) => {
        this.saved = false
        this.config.onWarning(
          `live rules cannot write the snapshot ${path}: ${(error as Error).message}`,
          'TG_RULES_SNAPSHOT',
        )
      })
  }

  private readFailed(error: TollgateError): void {
    this.stale = true
    if (this.failedReads++ > 0 || this.closed) return
    this.config.onWarning(
      `${error.message}; the rules of epoch ${this.held} stay in force until a read succeeds`,
      'TG_RULES_UNREACHABLE',
    )
  }

  private heard(epoch: number | undefined): void {
    this.nudgesLost = false
    if (epoch === undefined) this.refresh().catch(unlessReported)
    else this.noteEpoch(epoch)
  }

  private nudgesFailed(error: Error): void {
    if (this.nudgesLost || this.closed) return
    this.nudgesLost = true
    this.config.onWarning(
      `live rules cannot hear publishes (${error.message}): changes arrive by polling only, within ${this.config.pollIntervalMs} ms`,
      'TG_RULES_NUDGES_LOST',
    )
  }

  private schedule(): void {
    if (this.closed || this.config.pollIntervalMs === 0) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      if (Date.now() - this.notedAt < this.config.pollIntervalMs) {
        this.schedule()
        return
      }
      this.refresh()
        .catch(unlessReported)
        .finally(() => this.schedule())
    }, this.config.pollIntervalMs)
    this.timer.unref()
  }

  private warnOnce(message: string, code: string): void {
    if (this.warned.has(message)) return
    this.warned.add(message)
    this.config.onWarning(message, code)
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
    `the live rules are at epoch ${found}, not ${expected}: another publish came first; nothing was written`,
  )
}

function closedError(): TollgateError {
  return new TollgateError('TG_CLOSED', 'the live rules are closed')
}
