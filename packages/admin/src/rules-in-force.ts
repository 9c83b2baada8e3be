import {
  createLimiter,
  decodeLockoutState,
  formatDuration,
  type Limiter,
  LiveRules,
  RedisStore,
  type Rule,
  type StoreTarget,
  targetsOf,
  type Window,
} from '@tollgate/core'
import type { AdminConfig } from './options.js'

/**
 * LiveRules and createLimiter take at least one rule: a view given none stands this one in, which
 * no process has, no page shows and no reset can name.
 */
const STAND_IN = '__tollgate_admin__'

export interface RulesView {
  /** The live-rules epoch: how many publishes the rules in force include. */
  epoch: number
  /** True when the last read of the epoch failed: the epoch shown is the last one read. */
  stale: boolean
  /** Published rules this view would not apply (as a process would not), by name. */
  rejected: string[]
  /** The names of the rules in force: the ones a reset can name. */
  names: string[]
  /** Each rule in force by name: its windows (and parent), and what it does besides: by kind, overrides, block. */
  details: Array<{ name: string; windows: string; notes: string[] }>
}

/**
 * The fleet's rules as a process of it resolves them: the rules given to the view under the
 * overrides published through `LiveRules`, read when asked (no timer, no subscription). A reset
 * goes through a limiter on these rules and a RedisStore with the fleet's prefix, so that it
 * forgets the keys the fleet's decisions use, whatever shape a published override gave the rule.
 */
/** What a reset found: how many of the keys it forgot held state. */
export interface ResetOutcome {
  existed: number
  keyCount: number
}

export class RulesInForce {
  private readonly live: LiveRules
  private readonly limiter: Limiter<string>
  private readonly store: RedisStore
  private readonly client: AdminConfig['client']

  constructor(config: AdminConfig) {
    const { client, prefix, rules, onWarning } = config
    this.client = client
    this.live = new LiveRules({
      client,
      defaults: Object.keys(rules).length > 0 ? rules : { [STAND_IN]: { windows: [{ limit: 1, period: '1s' }] } },
      prefix,
      pollIntervalMs: 0,
      nudges: false,
      ...(onWarning ? { onWarning } : {}),
    })
    this.store = new RedisStore({ client, prefix })
    this.limiter = createLimiter({ rules: this.live, store: this.store })
  }

  /** Reads the epoch (one GET; the rules changed since, when it moved). Never rejects: a failed read shows as `stale`. */
  async read(): Promise<RulesView> {
    await this.live.refresh().catch(() => {})
    const { epoch, stale, rejected } = this.live.status()
    return {
      epoch,
      stale,
      rejected: rejected.map((rejection) => rejection.rule),
      names: [...this.limiter.rules.keys()].filter((name) => name !== STAND_IN).sort(),
      details: [...this.limiter.rules.values()]
        .filter((rule) => rule.name !== STAND_IN)
        .map((rule) => ({ name: rule.name, windows: windowsText(rule.windows), notes: notesOf(rule) }))
        .sort((a, b) => a.name.localeCompare(b.name)),
    }
  }

  /** When the rule's block on the identifier ends, if one is in force (one GET); undefined otherwise. */
  async blockedUntil(rule: string, identifier: string, nowMs: number): Promise<number | undefined> {
    const resolved = this.limiter.rules.get(rule)
    if (resolved?.block === undefined) return undefined
    let key: string
    try {
      key = `${this.store.keyOf(targetsOf([resolved], identifier)[0] as StoreTarget)}:block`
    } catch {
      // An identifier not of the rule's kinds: never charged by it, never blocked.
      return undefined
    }
    const text = await this.client.get(key)
    const state = text === null ? undefined : decodeLockoutState(text)
    return state !== undefined && state.until > nowMs ? state.until : undefined
  }

  has(rule: string): boolean {
    return rule !== STAND_IN && this.limiter.rules.has(rule)
  }

  /**
   * Forgets the identifier's state in the rule's own windows (its parents keep theirs), and says
   * how many of its keys held any, as `tollgate reset` does: a reset of an identifier no process
   * counted (a mistyped one, or one masked as the page shows it) finds none.
   */
  async reset(rule: string, identifier: string): Promise<ResetOutcome> {
    const resolved = this.limiter.rules.get(rule)
    if (resolved === undefined) throw new Error(`no rule ${JSON.stringify(rule)} is in force`)
    // The state of the rule's windows, or of an override's for that identifier.
    const keys = targetsOf([resolved], identifier).map((target) => this.store.keyOf(target))
    const existed = await countExisting(this.client, keys)
    await this.limiter.reset(rule, identifier)
    return { existed, keyCount: keys.length }
  }

  async close(): Promise<void> {
    await this.limiter.close()
    await this.live.close()
  }
}

/** One EXISTS per key: on a Cluster, the keys of several identifiers may sit in several slots. */
async function countExisting(client: AdminConfig['client'], keys: readonly string[]): Promise<number> {
  const found = await Promise.all(keys.map((key) => client.exists(key)))
  return found.reduce((sum, n) => sum + n, 0)
}

/** What the page says of a rule besides its name: whom it charges, its overrides, its block. */
function notesOf(rule: Rule): string[] {
  const notes: string[] = []
  if (rule.parent !== undefined) notes.push(`within ${rule.parent}`)
  if (rule.by !== undefined) notes.push(rule.by.length === 0 ? 'one count for everyone' : `by ${rule.by.join(', ')}`)
  for (const override of rule.overrides?.list ?? []) notes.push(`${override.key}: ${windowsText(override.windows)}`)
  if (rule.block !== undefined) {
    const { forMs, after, factor, maxMs } = rule.block
    notes.push(
      `block ${formatDuration(forMs)}${after === 1 ? '' : ` after ${after} refusals`}${factor === 1 ? '' : `, ×${factor} up to ${formatDuration(maxMs)}`}`,
    )
  }
  return notes
}

function windowsText(windows: readonly Window[]): string {
  return windows.map((window) => `${window.limit}/${formatDuration(window.periodMs)}`).join(', ')
}
