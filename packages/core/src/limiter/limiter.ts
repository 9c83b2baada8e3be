import { EventEmitter } from 'node:events'
import type { LiveRules } from '../live-rules/live-rules.js'
import type { RulesFollower } from '../live-rules/source.js'
import type { Decision } from '../rules/decision.js'
import type { Rule, RulesOptions, WarningHandler } from '../rules/rules.js'
import type { BreakerChange } from '../store-calls/circuit-breaker.js'
import type { DecisionObserver } from '../store-calls/decision-observer.js'
import {
  callSettingsOf,
  type DecisionOptions,
  type ResetOptions,
  resetsParents,
} from '../store-calls/decision-options.js'
import { type Identifiers, identifiersOf, planOf, ruleOf, targetsOf } from '../store-calls/decision-plan.js'
import { type LimiterEvents, StoreCaller } from '../store-calls/store-caller.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import type { Store, StoreOperation } from '../stores/store.js'
import { TollgateError } from '../support/errors.js'
import { CONSUME_NOW, type ConsumeNow, promised } from './consume-now.js'
import { type ActiveRules, type LimiterConfig, type LimiterOptions, limiterConfigOf } from './limiter-config.js'

/**
 * `Name` is the rule names the limiter holds: those of a literal `rules` object, so that a
 * misspelt name fails to compile, or any string for rules loaded at run time or live rules.
 */
export interface Limiter<Name extends string = string> extends EventEmitter<LimiterEvents> {
  /** Checks every window of the rule and its parents for every identifier; charges all or none. */
  consume(rule: Name, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  /** The decision `consume` would make now, charging nothing. */
  peek(rule: Name, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  /** Gives `cost` units back to every window `consume` would charge, most recent first, each window what it still counts of them; all or nothing. Store failures reject (code `TG_STORE`). */
  refund(rule: Name, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Decision>
  /**
   * Forgets the state of the rule's own windows for these identifiers; with `{ parents: true }`,
   * its parents' too. Store failures reject (code `TG_STORE`).
   */
  reset(rule: Name, identifiers: string | readonly string[], options?: ResetOptions): Promise<void>
  /** Refuses new calls, waits for those in flight, then closes the store. */
  close(): Promise<void>
  /**
   * Shows every `consume` decision and every store failure to `observer` from now on, such as a
   * `DecisionCounts` that metrics read; returns the function that detaches it.
   * @example const detach = limiter.observe(new DecisionCounts())
   */
  observe(observer: DecisionObserver): () => void
  /** The resolved rules, by name: with live rules, the set in force now. */
  readonly rules: ReadonlyMap<string, Rule>
  /** The store deciding, so that other limiters can share it. */
  readonly store: Store
  /** The circuit breaker's state: `closed` while the store answers. */
  readonly breakerState: BreakerChange['state']
}

/**
 * A decision resolves its rule once, as it starts: it runs on the rule set of that moment, and
 * live rules applied meanwhile reach the next one.
 * @example
 * const limiter = createLimiter({ rules: { api: { windows: [{ limit: 100, period: '1 minute' }] } } })
 * const decision = await limiter.consume('api', 'ip:203.0.113.7')
 */
export function createLimiter<const Rules extends RulesOptions | LiveRules>(
  options: LimiterOptions<Rules>,
): Limiter<Rules extends LiveRules ? string : keyof Rules & string> {
  const config = limiterConfigOf(options)
  const { callDefaults } = config
  let active = config.active
  const events = new EventEmitter<LimiterEvents>()
  // Made only once everything else is valid, so a config error leaves no sweep timer behind.
  const store: Store = config.store ?? new MemoryStore()
  const caller = new StoreCaller(store, config.breaker, config.backlog, events, config.onWarning)
  const { live } = config
  const stopFollowing = live?.follow(
    follower(config, events, (next) => {
      active = next
    }),
  )
  // With a store that syncs on a schedule, the epoch rides on its sync: no poll of its own.
  const stopReading = live
    ? store.readOnEachSync?.(live.epochKey, (value) => live.noteEpoch(value === null ? 0 : Number(value)))
    : undefined
  const unfollow = () => {
    stopFollowing?.()
    stopReading?.()
  }

  /** The decision at once when the store decides in the process, else its promise (consume-now.ts). */
  function decide(
    operation: StoreOperation,
    rule: string,
    identifiers: unknown,
    options: unknown,
  ): Decision | Promise<Decision> {
    if (caller.closing) return Promise.reject(closedError())
    let plan: ReturnType<typeof planOf>
    try {
      plan = planOf(
        operation,
        ruleOf(active.rules, rule),
        identifiersOf(identifiers),
        callSettingsOf(options, callDefaults),
        active,
      )
    } catch (error) {
      return Promise.reject(error)
    }
    return caller.decide(plan)
  }

  // Properties, not copied values: Object.assign would read them once.
  Object.defineProperty(events, 'breakerState', { get: () => caller.breakerState, enumerable: true })
  Object.defineProperty(events, 'rules', { get: () => active.rules, enumerable: true })
  const consumeNow: ConsumeNow = (rule, identifiers, options) => decide('consume', rule, identifiers, options)
  Object.defineProperty(events, CONSUME_NOW, { value: consumeNow })
  const limiter: Limiter = Object.assign(
    events as EventEmitter<LimiterEvents> & {
      readonly breakerState: BreakerChange['state']
      readonly rules: ReadonlyMap<string, Rule>
    },
    {
      store,
      consume: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
        promised(decide('consume', rule, identifiers, options)),
      peek: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
        promised(decide('peek', rule, identifiers, options)),
      refund: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
        promised(decide('refund', rule, identifiers, options)),
      reset(rule: string, identifiers: string | readonly string[], options?: ResetOptions) {
        if (caller.closing) return Promise.reject(closedError())
        let chain: readonly Rule[]
        let ids: Identifiers
        try {
          const resolved = ruleOf(active.rules, rule)
          ids = identifiersOf(identifiers)
          chain = resetsParents(options) ? resolved.chain : [resolved]
        } catch (error) {
          return Promise.reject(error)
        }
        return caller.reset(targetsOf(chain, ids), config.storeTimeoutMs)
      },
      close: () => {
        unfollow()
        return caller.close()
      },
      observe: (observer: DecisionObserver) => caller.observers.add(observer),
    },
  )
  return limiter
}

/** How a limiter takes live rules: resolved its own way, warnings it already gave left out. */
function follower(
  config: LimiterConfig,
  events: EventEmitter<LimiterEvents>,
  install: (next: ActiveRules) => void,
): RulesFollower<{ next: ActiveRules; warnings: Array<[string, string]> }> {
  /** Whether a rule was rejected since the last set applied: an epoch that moved over rejections alone is told. */
  let rejected = false
  return {
    resolve(options, live) {
      // Held until the set is applied: a set that is then rejected must not have warned.
      const warnings: Array<[string, string]> = []
      const collect: WarningHandler = (message, code) => warnings.push([message, code])
      return { next: config.resolve(options, collect, live), warnings }
    },
    apply(resolved, change) {
      if (resolved) {
        install(resolved.next)
        for (const [message, code] of resolved.warnings) {
          if (config.warned.has(message)) continue
          config.warned.add(message)
          config.onWarning(message, code)
        }
      }
      // Told when rules changed, or when every change was rejected; not when the rules read (the
      // first read at start-up, say) are the ones the limiter holds already.
      if (change.changed.length > 0 || rejected) events.emit('rules', change)
      rejected = false
    },
    reject(rejection) {
      rejected = true
      events.emit('rules-rejected', rejection)
    },
  }
}

function closedError() {
  return new TollgateError('TG_CLOSED', 'the limiter is closed')
}
