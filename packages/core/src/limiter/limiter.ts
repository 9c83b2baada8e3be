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
import { identifiersOf, planOf, ruleOf } from '../store-calls/decision-plan.js'
import { type LimiterEvents, StoreCaller } from '../store-calls/store-caller.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import { type Identifiers, targetsOf } from '../stores/shared/decision-targets.js'
import type { Store, StoreOperation } from '../stores/store.js'
import { TollgateConfigError, TollgateError } from '../support/errors.js'
import { CONSUME_NOW, type ConsumeNow, promisedDecision } from './consume-now.js'
import {
  type ActiveRules,
  type LimiterConfig,
  type LimiterOptions,
  limiterConfigOf,
  storeName,
} from './limiter-config.js'
import { type Reservation, reservationOf, writeOptionsOf } from './reservation.js'
import { holdRules } from './rule-name-clash.js'
import type { WaitOptions } from './wait-options.js'
import { Waits } from './waits.js'

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
  /**
   * Waits until the units fit, then charges them: resolves with the allowed decision of that
   * `consume`. Waits for the same rule and identifiers are served first come first served, in
   * this process. Rejects with `TG_WAIT_TIMEOUT` once `maxWaitMs` has passed (at once when the
   * store says the units fit only later), `TG_ABORTED` when `signal` aborts, `TG_CLOSED` on
   * `close()`, `TG_INVALID_ARGUMENT` at once for a cost above a window's limit, and with the
   * store's failure (`TG_STORE`) when the failure policy refuses (`'deny'`).
   * @example const decision = await limiter.wait('github.api', 'app:42', { maxWaitMs: 60_000 })
   */
  wait(rule: Name, identifiers: string | readonly string[], options?: WaitOptions): Promise<Decision>
  /**
   * Charges an estimate (`cost`, default 1) for a cost known only later, as `consume` charges it,
   * and resolves with the reservation: its decision, and `settle(actualCost)` to charge the actual
   * cost instead (above the estimate, whether it fits or not) or `cancel()` to give it back,
   * each once. Needs a store with `chargesOverLimits` (MemoryStore, RedisStore); rejects with
   * `TG_CONFIG` on another.
   * @example const reservation = await limiter.reserve('llm.tokens', 'org:acme', { cost: 2_000 })
   */
  reserve(rule: Name, identifiers: string | readonly string[], options?: DecisionOptions): Promise<Reservation>
  /** Refuses new calls, ends pending waits, waits for the calls in flight, then closes the store. */
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
  const waits = new Waits({
    active: () => active,
    callDefaults,
    consume: consumeNow,
    refund: (rule, identifiers, options) => promisedDecision(decide('refund', rule, identifiers, options)),
  })
  const limiter: Limiter = Object.assign(
    events as EventEmitter<LimiterEvents> & {
      readonly breakerState: BreakerChange['state']
      readonly rules: ReadonlyMap<string, Rule>
    },
    {
      store,
      consume: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
        promisedDecision(decide('consume', rule, identifiers, options)),
      peek: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
        promisedDecision(decide('peek', rule, identifiers, options)),
      refund: (rule: string, identifiers: string | readonly string[], options?: DecisionOptions) =>
        promisedDecision(decide('refund', rule, identifiers, options)),
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
      wait: (rule: string, identifiers: string | readonly string[], options?: WaitOptions) =>
        waits.wait(rule, identifiers, options),
      async reserve(rule: string, identifiers: string | readonly string[], options?: DecisionOptions) {
        if (store.chargesOverLimits !== true) {
          throw new TollgateConfigError(
            `limiter.reserve needs a store that charges over a limit (MemoryStore, RedisStore); ${storeName(store)} does not`,
          )
        }
        const decision = await promisedDecision(decide('consume', rule, identifiers, options))
        return reservationOf(decision, decision.cost, {
          refund: (cost) => promisedDecision(decide('refund', rule, identifiers, writeOptionsOf(options, cost))),
          charge: (cost) => promisedDecision(decide('charge', rule, identifiers, writeOptionsOf(options, cost))),
        })
      },
      close: () => {
        waits.close()
        unfollow()
        return caller.close()
      },
      observe: (observer: DecisionObserver) => caller.observers.add(observer),
    },
  )
  holdRules(store, limiter, { rules: () => active.rules, closed: () => caller.closing, live })
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
