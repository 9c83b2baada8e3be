import {
  createLimiter,
  type Limiter,
  LiveRules,
  loadRules,
  RedisStore,
  type Rule,
  type RulesOptions,
} from '@tollgate/core'
import { CliError, usageError } from './errors.js'
import type { Output } from './output.js'
import type { Connection } from './redis.js'
import type { GlobalOptions } from './session.js'

/**
 * The rules the CLI works with. `live` reads what is published under the prefix, over the
 * defaults of `--rules` (or none): the same LiveRules every process of the fleet runs, so that
 * a rule resolves here as it does there, its state under the same `stateName`.
 */
export interface RuleSet {
  /** `'live'`: Redis holds published rules under the prefix (epoch > 0); `'file'`: `--rules` alone. */
  readonly source: 'live' | 'file'
  readonly epoch: number
  /** The `--rules` file, if given. */
  readonly file: string | undefined
  readonly live: LiveRules
  /** The rules in force, resolved, by name. */
  readonly rules: ReadonlyMap<string, Rule>
  /** A limiter over these rules on Redis, for peeks and resets; made on first use. */
  limiter(): { limiter: Limiter; store: RedisStore }
}

/** The live rules, read once; `register` is given what to close when the command ends. */
export async function liveRulesOf(
  connection: Connection,
  options: GlobalOptions,
  out: Output,
  register: (close: () => Promise<void>) => void,
): Promise<LiveRules> {
  const defaults: RulesOptions = options.rules === undefined ? {} : loadRules(options.rules)
  const live = new LiveRules({
    client: connection.client,
    defaults,
    prefix: options.prefix,
    // One read, now: the command ends long before a poll or a nudge would matter.
    pollIntervalMs: 0,
    nudges: false,
    onWarning: (message, code) => out.warn(message, code),
  })
  register(() => live.close())
  await live.refresh()
  if (live.status().rejected.length > 0 && options.rules === undefined) {
    out.note(
      `published rules that name rules of the application's own (a parent, say) resolve only with its defaults: give --rules <the application's rules file>`,
    )
  }
  return live
}

/** Throws a usage error when there are no rules at all: nothing published and no `--rules`. */
export function ruleSetOf(
  connection: Connection,
  live: LiveRules,
  options: GlobalOptions,
  register: (close: () => Promise<void>) => void,
): RuleSet {
  const { epoch } = live
  if (epoch === 0 && options.rules === undefined) {
    throw usageError(
      `no rules: nothing is published under prefix ${JSON.stringify(options.prefix)} (live rules epoch 0), and no --rules <file> was given`,
    )
  }
  const rules = live.preview()
  if (rules.size === 0) {
    throw new CliError(
      'TG_USAGE',
      `no rules: the live rules under prefix ${JSON.stringify(options.prefix)} (epoch ${epoch}) hold none of their own; give --rules <the application's rules file>`,
    )
  }
  let made: { limiter: Limiter; store: RedisStore } | undefined
  return {
    source: epoch > 0 ? 'live' : 'file',
    epoch,
    file: options.rules,
    live,
    rules,
    limiter() {
      if (made) return made
      const store = new RedisStore({ client: connection.client, prefix: options.prefix })
      const limiter = createLimiter({
        rules: live,
        store,
        // An admin command waits for its one answer; a store failure must fail it, never be decided around.
        storeTimeoutMs: 10_000,
        onStoreError: 'deny',
        onWarning: () => {},
      })
      register(() => limiter.close())
      made = { limiter, store }
      return made
    },
  }
}
