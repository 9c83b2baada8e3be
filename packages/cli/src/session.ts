import { hybridInstancesKey, type LiveRules } from '@tollgate/core'
import { confirm } from './confirm.js'
import { type ExitCode, usageError } from './errors.js'
import type { Io } from './io.js'
import { Output } from './output.js'
import { type Connection, connect } from './redis.js'
import { type RedisUrlSource, redisTargetOf } from './redis-url.js'
import { liveRulesOf, type RuleSet, ruleSetOf } from './rule-set.js'

/** The options every command takes, wherever they stand on the command line. */
export interface GlobalOptions {
  /** The Redis URL: `--redis`, else `REDIS_URL`. */
  readonly redis: string | undefined
  /** Which of the two gave it, for messages. */
  readonly redisSource: RedisUrlSource
  readonly prefix: string
  /** A rules file: the rules in use when none are live, and the defaults under live ones. */
  readonly rules: string | undefined
  readonly json: boolean
  readonly cluster: boolean
}

/**
 * One run of one command: its options, its output, and what it opened (a connection, live
 * rules, a limiter), all closed when the command ends, so that the process exits by itself.
 */
export class Session {
  readonly out: Output
  /** What the program exits with when the command returns: a command whose checks failed sets 1. */
  exitCode: ExitCode = 0
  private connection: Promise<Connection> | undefined
  private live: Promise<LiveRules> | undefined
  private rules: Promise<RuleSet> | undefined
  private readonly closers: Array<() => Promise<void>> = []

  constructor(
    readonly io: Io,
    readonly options: GlobalOptions,
    private readonly local: Readonly<Record<string, unknown>> = {},
  ) {
    this.out = new Output(io, options.json)
    try {
      hybridInstancesKey(options.prefix)
    } catch {
      throw usageError(
        `--prefix must be at most 64 characters without '{' or '}' (they would break Cluster hash tags), got ${JSON.stringify(options.prefix)}`,
      )
    }
  }

  /** The options of the command itself (`--yes`, `--parents`…), as commander parsed them. */
  commandOptions<T extends object>(): Readonly<Partial<T>> {
    return this.local as Partial<T>
  }

  /** Connects on first use. */
  redis(): Promise<Connection> {
    if (this.connection === undefined) {
      const url = this.options.redis
      if (url === undefined || url === '') {
        throw usageError('no Redis to talk to: give --redis <url> or set REDIS_URL')
      }
      this.connection = connect(redisTargetOf(url, this.options.redisSource), this.options.cluster)
      this.connection.then(
        (connection) => this.closers.push(() => connection.close()),
        () => {},
      )
    }
    return this.connection
  }

  /** The live rules under the prefix, read once, over the `--rules` defaults (or none). */
  liveRules(): Promise<LiveRules> {
    this.live ??= this.redis().then((connection) =>
      liveRulesOf(connection, this.options, this.out, (close) => this.closers.unshift(close)),
    )
    return this.live
  }

  /** The rules in use: live ones when Redis holds some under the prefix, else `--rules`. */
  ruleSet(): Promise<RuleSet> {
    this.rules ??= Promise.all([this.redis(), this.liveRules()]).then(([connection, live]) =>
      ruleSetOf(connection, live, this.options, (close) => this.closers.unshift(close)),
    )
    return this.rules
  }

  /** Resolves once the user confirmed `question`; throws when there is no one to ask or they declined. */
  confirm(question: string, yes: boolean, what: string): Promise<void> {
    return confirm(this.io, question, yes, what)
  }

  async close(): Promise<void> {
    // Limiters and live rules before the connection they use.
    for (const close of this.closers.splice(0)) await close().catch(() => {})
  }
}
