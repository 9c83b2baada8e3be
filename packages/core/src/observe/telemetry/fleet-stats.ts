import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import type { Limiter } from '../../limiter/limiter.js'
import type { RedisConnection } from '../../redis-clients/connection.js'
import { connectionOf } from '../../redis-clients/connection-of.js'
import type { NodeRedisClientLike } from '../../redis-clients/node-redis.js'
import type { Decision } from '../../rules/decision.js'
import { validatePrefix } from '../../rules/keys.js'
import type { Rule, WarningHandler } from '../../rules/rules.js'
import type { DecisionObserver } from '../../store-calls/decision-observer.js'
import { type Clock, clockOption, timeFrom } from '../../support/clock.js'
import { describeValue, TollgateConfigError } from '../../support/errors.js'
import { checkOptionsObject, optionKeys, wholeOption } from '../../support/option-objects.js'
import { processWarning } from '../../support/process-warning.js'
import { MAX_TIMER_MS } from '../../support/timer-delay.js'
import { NamesOfStates } from '../metrics/names-of-states.js'
import { DECISION_OUTCOMES, outcomeOf } from '../metrics/outcomes.js'
import { RuleLabels, windowLabel } from '../metrics/rule-labels.js'
import { fleetStatsKeys } from './fleet-stats-keys.js'
import { SpaceSaving } from './space-saving.js'

/** The commands a flush sends: one pipeline (ioredis `Redis` or `Cluster`). */
export interface FleetStatsClient {
  pipeline(): {
    hincrby(key: string, field: string, increment: number): unknown
    zincrby(key: string, increment: number, member: string): unknown
    hset(key: string, field: string, value: string): unknown
    sadd(key: string, member: string): unknown
    zadd(key: string, score: number, member: string): unknown
    zremrangebyscore(key: string, min: string | number, max: string | number): unknown
    pexpire(key: string, ms: number): unknown
    exec(): Promise<unknown>
  }
}

export interface FleetStatsOptions {
  /** An ioredis (or iovalkey) client, `Redis` or `Cluster`, or a node-redis one, connected; never closed by the stats. */
  client: FleetStatsClient | NodeRedisClientLike
  /**
   * The prefix the fleet's limiters use: `tollgate top` and `tollgate watch` read it.
   * @default 'tg:'
   */
  prefix?: string
  /**
   * How often this process writes its counts: one pipeline per flush, whatever the request rate.
   * @default 1000
   */
  flushIntervalMs?: number
  /**
   * How often it writes its heaviest refused identifiers per rule, and the span each such list
   * covers (`tollgate top --since` merges them).
   * @default 10_000
   */
  topIntervalMs?: number
  /**
   * Refused identifiers counted per rule between two writes (Space-Saving: every identifier
   * refused more than 1 ÷ topSize of the rule's refusals is among them).
   * @default 200
   */
  topSize?: number
  /**
   * How long what is written stays in Redis.
   * @default 900_000 (15 minutes)
   */
  retentionMs?: number
  /** Rules counted under names of their own; later ones count as `__other__`. @default 200 */
  maxRules?: number
  /**
   * Wall-clock time for the lists of refused identifiers (tests move it); the counts go by each
   * decision's own time.
   * @default Date.now
   */
  clock?: Clock
  /** Where a failed write is told, once until one succeeds again (`TG_FLEET_STATS_UNWRITTEN`). @default process.emitWarning */
  onWarning?: WarningHandler
}

/** A limiter's counts, shared with the fleet: see `shareFleetStats`. */
export interface FleetStats {
  /** Writes what was counted so far now (the timer does it every `flushIntervalMs`). */
  flush(): Promise<void>
  /** Stops counting and writes what is left. */
  close(): Promise<void>
}

const OPTION_KEYS = optionKeys<FleetStatsOptions>({
  client: true,
  prefix: true,
  flushIntervalMs: true,
  topIntervalMs: true,
  topSize: true,
  retentionMs: true,
  maxRules: true,
  clock: true,
  onWarning: true,
})

/** One rule's counts in one second. */
interface RuleSecond {
  readonly label: string
  readonly outcomes: Float64Array
  /** Refusals per window label. */
  readonly denials: Map<string, number>
}

/**
 * Counts a limiter's decisions per second by rule, outcome and refusing window, and its refused
 * identifiers per rule in a heavy-hitter sketch, and writes them to Redis in one pipeline per
 * `flushIntervalMs`, never per request: `tollgate watch` and `tollgate top` (and the admin view)
 * read the whole fleet's from there. Identifiers are written only to Redis, for the operator.
 * @example
 * const stats = shareFleetStats(limiter, { client: redis })
 * // … on shutdown
 * await stats.close()
 */
export function shareFleetStats(limiter: Limiter, options: FleetStatsOptions): FleetStats {
  const config = configOf(options)
  const writer = new FleetStatsWriter(limiter, config)
  const detach = limiter.observe(writer)
  let closed = false
  return {
    flush: () => writer.flush(),
    async close() {
      if (closed) return
      closed = true
      detach()
      writer.stop()
      await writer.flush()
    },
  }
}

type FleetStatsConfig = Required<Omit<FleetStatsOptions, 'client' | 'onWarning' | 'clock'>> & {
  connection: RedisConnection
  onWarning: WarningHandler
  now: () => number
}

class FleetStatsWriter implements DecisionObserver {
  readonly timeEvery = 0
  private readonly keys: ReturnType<typeof fleetStatsKeys>
  private readonly labels: RuleLabels
  private readonly namesOfStates = new NamesOfStates()
  /**
   * How the admin view and `tollgate top` name this process: its host, so that an operator can
   * find it, its pid, and a few random characters that keep a restart apart from the process
   * before it.
   */
  private readonly instance = instanceName()
  /** Seconds counted and not written yet, by second. */
  private readonly seconds = new Map<number, Map<Rule, RuleSecond>>()
  private second = -1
  private current: Map<Rule, RuleSecond> | undefined
  private readonly top = new Map<string, SpaceSaving>()
  private topSince: number
  private storeFailures = 0
  private readonly timer: NodeJS.Timeout
  private failing = false

  constructor(
    private readonly limiter: Limiter,
    private readonly config: FleetStatsConfig,
  ) {
    this.keys = fleetStatsKeys(config.prefix)
    this.labels = new RuleLabels(config.maxRules)
    this.topSince = config.now()
    this.timer = setInterval(() => void this.flush(), config.flushIntervalMs)
    this.timer.unref()
  }

  decided(rule: Rule, decision: Decision): void {
    const second = Math.floor(decision.nowMs / 1000)
    if (second !== this.second) {
      this.second = second
      this.current = this.seconds.get(second)
      if (this.current === undefined) {
        this.current = new Map()
        this.seconds.set(second, this.current)
      }
    }
    const seconds = this.current as Map<Rule, RuleSecond>
    let counts = seconds.get(rule)
    if (counts === undefined) {
      counts = {
        label: this.labels.labelOf(rule.name),
        outcomes: new Float64Array(DECISION_OUTCOMES.length),
        denials: new Map(),
      }
      seconds.set(rule, counts)
      this.namesOfStates.note(rule)
    }
    const outcome = outcomeOf(decision.reason)
    counts.outcomes[outcome] = (counts.outcomes[outcome] as number) + 1
    if (decision.allowed && decision.reason !== 'dry-run') return
    let refused: string | undefined
    for (const window of decision.windows) {
      if (!window.failed) continue
      const label = windowLabel(window.periodMs)
      counts.denials.set(label, (counts.denials.get(label) ?? 0) + 1)
      if (window.identifier !== refused) {
        refused = window.identifier
        this.sketchOf(counts.label).add(window.identifier, 1)
      }
    }
  }

  storeFailed(): void {
    this.storeFailures++
  }

  stop(): void {
    clearInterval(this.timer)
  }

  /** Never rejects: a failed write is warned of once, and its counts are dropped. */
  async flush(): Promise<void> {
    try {
      await this.write()
      this.failing = false
    } catch (error) {
      if (this.failing) return
      this.failing = true
      this.config.onWarning(
        `fleet stats could not be written to Redis (${(error as Error).message}); those counts are dropped`,
        'TG_FLEET_STATS_UNWRITTEN',
      )
    }
  }

  private async write(): Promise<void> {
    const { connection, topIntervalMs } = this.config
    const retentionMs = String(this.config.retentionMs)
    const commands: string[][] = []
    let counted = 0
    for (const [second, rules] of this.seconds) {
      const key = this.keys.second(second)
      for (const counts of rules.values()) {
        counts.outcomes.forEach((count, outcome) => {
          if (count === 0) return
          commands.push(['HINCRBY', key, `${counts.label}\t${DECISION_OUTCOMES[outcome]}`, String(count)])
          counted++
        })
        for (const [window, count] of counts.denials) {
          commands.push(['HINCRBY', key, `${counts.label}\t${window}\tdenied`, String(count)])
          counted++
        }
      }
      if (this.storeFailures > 0) {
        commands.push(['HINCRBY', key, 'store\terrors', String(this.storeFailures)])
        this.storeFailures = 0
      }
      commands.push(['PEXPIRE', key, retentionMs])
    }
    this.seconds.clear()
    this.second = -1
    this.current = undefined
    const now = this.config.now()
    if (now - this.topSince >= topIntervalMs) {
      const span = Math.floor(now / topIntervalMs)
      const topRules = this.keys.topRules(span)
      for (const [label, sketch] of this.top) {
        const key = this.keys.top(label, span)
        for (const { item, count } of sketch.entries()) commands.push(['ZINCRBY', key, String(count), item])
        commands.push(['PEXPIRE', key, retentionMs], ['SADD', topRules, label], ['PEXPIRE', topRules, retentionMs])
        counted++
        sketch.clear()
      }
      this.topSince = now
    }
    const stats = (this.limiter.store as { stats?: () => unknown }).stats
    if (counted > 0 || typeof stats === 'function') {
      const key = this.keys.process(this.instance)
      const live = 3 * this.config.flushIntervalMs
      if (typeof stats === 'function') {
        commands.push(['HSET', key, 'hybrid', JSON.stringify(stats.call(this.limiter.store), this.byRuleLabel)])
      }
      const { processes } = this.keys
      commands.push(
        ['HSET', key, 'at', String(now)],
        ['PEXPIRE', key, String(live)],
        ['ZADD', processes, String(now), this.instance],
        ['ZREMRANGEBYSCORE', processes, '-inf', String(now - live)],
        ['PEXPIRE', processes, retentionMs],
      )
      counted++
    }
    if (counted === 0) return
    await connection.pipeline(commands)
  }

  /**
   * HybridStats keeps its counts by rule in Maps, which JSON would write as `{}`, keyed by state
   * name (`name@digest`): written as objects by the rule labels the counts are written under.
   */
  private readonly byRuleLabel = (_key: string, value: unknown): unknown => {
    if (!(value instanceof Map)) return value
    const byLabel = new Map<string, number>()
    for (const [stateName, count] of value as Map<string, number>) {
      const label = this.labels.labelOf(this.namesOfStates.nameOf(stateName))
      byLabel.set(label, (byLabel.get(label) ?? 0) + count)
    }
    return Object.fromEntries(byLabel)
  }

  private sketchOf(label: string): SpaceSaving {
    let sketch = this.top.get(label)
    if (sketch === undefined) {
      sketch = new SpaceSaving(this.config.topSize)
      this.top.set(label, sketch)
    }
    return sketch
  }
}

function configOf(options: FleetStatsOptions): FleetStatsConfig {
  const raw = checkOptionsObject(options, OPTION_KEYS, 'shareFleetStats options', { shape: '{ client }' })
  const connection = connectionOf(raw.client, 'shareFleetStats option client')
  const prefix = validatePrefix(raw.prefix ?? 'tg:', 'shareFleetStats')
  const whole = (name: string, value: unknown, least: number, most?: number) =>
    wholeOption('shareFleetStats', name, value, least, most)
  const onWarning = raw.onWarning ?? processWarning
  if (typeof onWarning !== 'function') {
    throw new TollgateConfigError(
      `shareFleetStats option onWarning must be a function, got ${describeValue(onWarning)}`,
    )
  }
  const clock = clockOption(raw.clock ?? Date.now, 'shareFleetStats')
  return {
    connection,
    prefix,
    now: () => timeFrom(clock as Clock, 'shareFleetStats'),
    // A timer's delay: past MAX_TIMER_MS, Node would flush every millisecond.
    flushIntervalMs: whole('flushIntervalMs', raw.flushIntervalMs ?? 1000, 10, MAX_TIMER_MS),
    topIntervalMs: whole('topIntervalMs', raw.topIntervalMs ?? 10_000, 10),
    topSize: whole('topSize', raw.topSize ?? 200, 1),
    retentionMs: whole('retentionMs', raw.retentionMs ?? 900_000, 1000),
    maxRules: whole('maxRules', raw.maxRules ?? 200, 1),
    onWarning: onWarning as WarningHandler,
  }
}

/** `<host>/<pid>-<8 hex>`, the host kept to the characters a key and a table cell take plainly. */
function instanceName(): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .slice(0, 63) || 'host'
  return `${host}/${process.pid}-${randomBytes(4).toString('hex')}`
}
