import { TollgateError } from '../support/errors.js'
import type { AppliedRules, CheckedSet } from './applied-rules.js'
import { unlessReported } from './listener-failure.js'
import type { LiveRulesConfig } from './options.js'
import { onReconnection } from './reconnections.js'
import type { ReadReply, RedisRules, RulesStamp } from './redis-rules.js'
import type { LiveRuleSet } from './rule-set.js'
import { readSnapshot, writeSnapshot } from './snapshot.js'

const noop = () => {}

/**
 * How this process follows the rules Redis holds: it reads on `refresh()`, on a timer, on a
 * nudge, on an epoch read elsewhere and whenever the client connects again, one read at a time,
 * and applies what it read; it says when Redis cannot be read and when Redis no longer holds the
 * rules this process applied (a publish lost); and it keeps the snapshot.
 *
 * A read compares the epoch this process holds, and the id of the publish that made it, with
 * Redis's, except the poll's: while its last read succeeded and nothing says Redis changed, the
 * poll reads the epoch alone (one GET), and reads the rules only when it moved. What says Redis
 * may have changed under the same epoch number (a failover that lost a publish) makes the next
 * read a whole one: a reconnection, a failed read, a nudge of another publish.
 */
export class RulesReader {
  private stale = true
  private failedReads = 0
  private nudgesLost = false
  private running: Promise<void> | undefined
  private queued: Promise<void> | undefined
  private timer: NodeJS.Timeout | undefined
  private unsubscribe: (() => void) | undefined
  private stopHearingReconnections: (() => void) | undefined
  private saving: Promise<void> = Promise.resolve()
  private saved = false
  private closed = false
  /** When an epoch read elsewhere (`noteEpoch`, a nudge) last came in (wall clock, ms). */
  private notedAt = 0
  /** The ids of this process's publishes under way, applied when they return: their nudges need no read. */
  private readonly publishing = new Set<string>()

  constructor(
    private readonly config: LiveRulesConfig,
    private readonly redis: RedisRules,
    private readonly applied: AppliedRules,
  ) {
    if (config.snapshotPath !== undefined) this.loadSnapshot(config.snapshotPath)
  }

  /** Starts listening for nudges and reconnections and polling, and reads at once. */
  start(): void {
    this.stopHearingReconnections = onReconnection(this.config.connection, () => this.refresh().catch(unlessReported))
    if (this.config.nudges) {
      try {
        this.unsubscribe = this.redis.subscribe(
          (stamp) => this.heard(stamp),
          (error) => this.nudgesFailed(error),
        )
      } catch (error) {
        this.nudgesFailed(error as Error)
      }
    }
    this.refresh().catch(unlessReported)
    this.schedule()
  }

  /** True from the start until a read of Redis succeeds, and again whenever the last read failed. */
  get isStale(): boolean {
    return this.stale
  }

  get isClosed(): boolean {
    return this.closed
  }

  /**
   * Reads Redis now, after the read under way if there is one: the rules changed since those
   * held, or every rule when Redis does not hold those. Rejects (`TG_STORE`) when Redis cannot be read.
   */
  refresh(): Promise<void> {
    if (this.closed) return Promise.reject(closedError())
    if (this.running === undefined) return this.startRead(true)
    // The read in flight may have started before what the caller waits for: one more after it.
    this.queued ??= this.running.then(noop, noop).then(() => {
      this.queued = undefined
      return this.closed ? undefined : this.startRead(true)
    })
    return this.queued
  }

  /** An epoch read elsewhere: a read follows when it is not the one applied, or when the last read failed. */
  noteEpoch(epoch: number): void {
    // An epoch read elsewhere is as good as the poll's: the poll skips its own read meanwhile.
    this.notedAt = Date.now()
    // While the last read failed, one that Redis answered elsewhere is worth a read of our own.
    if (this.closed || (epoch === this.applied.epoch && !this.stale)) return
    this.refresh().catch(unlessReported)
  }

  /**
   * Applies this process's own publish, which made `stamp` on top of `base` (the rule set `on`),
   * once it returned: from what it checked, not read back, unless a read meanwhile moved the rules
   * or a limiter began following them since the check. Should a read then fail, the poll applies it.
   */
  async published(
    stamp: RulesStamp,
    base: RulesStamp,
    on: LiveRuleSet,
    checked: CheckedSet,
    changed: readonly string[],
  ): Promise<void> {
    // A read in flight was sent before the publish, and answers what was there before it.
    await this.queued?.catch(noop)
    await this.running?.catch(noop)
    if (this.closed) return
    if (!this.applied.holds(base) || this.applied.ruleSet !== on || !this.applied.isCurrent(checked)) {
      await this.refresh().catch(unlessReported)
      return
    }
    try {
      this.applied.applyPublished(stamp, checked, changed)
    } finally {
      if (this.config.snapshotPath !== undefined) this.saveSnapshot(this.config.snapshotPath)
    }
  }

  /** Marks `id` as this process's publish under way until the function returned is called: its nudge needs no read. */
  publishingAs(id: string): () => void {
    this.publishing.add(id)
    return () => this.publishing.delete(id)
  }

  /** Stops polling and listening; waits for a read or snapshot under way. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.unsubscribe?.()
    this.stopHearingReconnections?.()
    await this.queued?.catch(noop)
    await this.running?.catch(noop)
    await this.saving
  }

  /** `whole`: compare the rules held with Redis's, rather than the epoch alone. */
  private startRead(whole: boolean): Promise<void> {
    const run = this.read(whole).finally(() => {
      if (this.running === run) this.running = undefined
    })
    this.running = run
    return run
  }

  private async read(whole: boolean): Promise<void> {
    let reply: ReadReply | undefined
    const held = this.applied.stamp
    try {
      // After a failed read, Redis may be another server: one that lost a publish.
      if (whole || this.stale || (await this.redis.epoch()) !== held.epoch) reply = await this.redis.readSince(held)
    } catch (error) {
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
    if (reply === undefined) {
      if (this.config.snapshotPath !== undefined && !this.saved) this.saveSnapshot(this.config.snapshotPath)
      return
    }
    if (reply.whole === 'lost') {
      this.config.onWarning(
        `live rules held epoch ${held.epoch} (publish ${held.id || 'not recorded'}), which Redis does not hold: it is at epoch ${reply.epoch} (publish ${reply.id || 'not recorded'}). A publish was lost (a failover before it reached a replica, a restart without persistence); every rule is read again, and what Redis holds applies`,
        'TG_RULES_DIVERGED',
      )
    }
    const advanced = !this.applied.holds(reply)
    try {
      this.applied.applyRead(reply, reply.rules, reply.whole !== undefined)
    } finally {
      const path = this.config.snapshotPath
      if (path !== undefined && (advanced || !this.saved)) this.saveSnapshot(path)
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
    this.applied.applyRead({ epoch: snapshot.epoch, id: snapshot.publishId ?? '' }, snapshot.rules, true)
    // Which publish made the epoch is not known: the first read reads every rule.
    if (snapshot.publishId === undefined) this.applied.forgetPublish()
  }

  private saveSnapshot(path: string): void {
    this.saved = true
    const { prefix } = this.config
    const { epoch, id } = this.applied.stamp
    const { overrides } = this.applied
    this.saving = this.saving
      .then(() => writeSnapshot(path, prefix, epoch, id, overrides))
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
      `${error.message}; the rules of epoch ${this.applied.epoch} stay in force until a read succeeds`,
      'TG_RULES_UNREACHABLE',
    )
  }

  private heard(stamp: RulesStamp | undefined): void {
    this.nudgesLost = false
    if (stamp === undefined) {
      this.refresh().catch(unlessReported)
      return
    }
    this.notedAt = Date.now()
    if (this.closed || this.publishing.has(stamp.id) || (this.applied.holds(stamp) && !this.stale)) return
    this.refresh().catch(unlessReported)
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
      // A read under way serves as this one.
      const read = this.running ?? this.startRead(false)
      read.catch(unlessReported).finally(() => this.schedule())
    }, this.config.pollIntervalMs)
    this.timer.unref()
  }
}

export function closedError(): TollgateError {
  return new TollgateError('TG_CLOSED', 'the live rules are closed')
}
