import type { Decision } from '../rules/decision.js'
import type { Rule } from '../rules/rules.js'
import type { CallSettings, DecisionOptions } from '../store-calls/decision-options.js'
import { identifiersOf, ruleOf } from '../store-calls/decision-plan.js'
import { type Identifiers, targetsOf } from '../stores/shared/decision-targets.js'
import { TollgateError } from '../support/errors.js'
import type { ConsumeNow } from './consume-now.js'
import type { ActiveRules } from './limiter-config.js'
import { neverFitsError, type TooSmallWindow, waitAbortedError } from './wait-errors.js'
import { waitSettingsOf } from './wait-options.js'
import { type WaitCalls, WaitQueue } from './wait-queue.js'
import { Waiter } from './waiter.js'

/** What waits need of their limiter. */
export interface WaitingLimiter {
  /** The rules in force now, and the limiter's own settings. */
  active(): ActiveRules
  /** What a call without options gets. */
  readonly callDefaults: CallSettings
  readonly consume: ConsumeNow
  refund(rule: string, identifiers: Identifiers, options: DecisionOptions | undefined): Promise<Decision>
}

/**
 * `limiter.wait`: one queue per rule and set of identifiers, made with its first waiter and
 * dropped once empty. Waits for other identifiers, or another rule, queue apart and never hold
 * each other up, though they may share a parent's windows; `consume` calls do not queue.
 */
export class Waits {
  private readonly queues = new Map<string, WaitQueue>()
  private readonly calls: WaitCalls
  private closed = false

  constructor(private readonly limiter: WaitingLimiter) {
    this.calls = {
      consume: (waiter) => limiter.consume(waiter.rule, waiter.identifiers, waiter.settings.decision),
      refund: (waiter) => {
        // No caller is left to tell: a failure of the store reaches the limiter's `store-error`
        // listeners already, and after `close()` the charge stays, as a call in flight's does.
        limiter.refund(waiter.rule, waiter.identifiers, waiter.settings.decision).catch(() => {})
      },
    }
  }

  /** Never throws: a mistake rejects, before anything is queued or asked. */
  wait(rule: string, identifiers: unknown, options: unknown): Promise<Decision> {
    if (this.closed) return Promise.reject(new TollgateError('TG_CLOSED', 'the limiter is closed'))
    let waiter: Waiter
    try {
      const settings = waitSettingsOf(options, this.limiter.callDefaults)
      const ids = identifiersOf(identifiers)
      const active = this.limiter.active()
      const resolved = ruleOf(active.rules, rule)
      if (settings.signal?.aborted) throw waitAbortedError(resolved.name, settings.signal)
      checkCanFit(resolved, ids, settings.call, active)
      const key = queueKey(resolved.name, ids)
      let queue = this.queues.get(key)
      if (queue === undefined) {
        queue = new WaitQueue(this.calls, (emptied) => {
          if (this.queues.get(key) === emptied) this.queues.delete(key)
        })
        this.queues.set(key, queue)
      }
      waiter = new Waiter(queue, resolved.name, ids, settings)
      queue.push(waiter)
    } catch (error) {
      return Promise.reject(error)
    }
    waiter.watch()
    return waiter.done
  }

  /** Ends every pending wait with TG_CLOSED, clearing their timers; refuses new ones. */
  close(): void {
    this.closed = true
    for (const queue of this.queues.values()) queue.close()
  }
}

/**
 * A cost above a window's limit can never fit: refused at once rather than queued, unless the
 * wait is in dry run, where `consume` lets it through. The windows are the decision's own, those
 * of the identifiers' overrides included.
 */
function checkCanFit(rule: Rule, identifiers: Identifiers, call: CallSettings, active: ActiveRules): void {
  if (call.dryRun ?? rule.dryRun ?? active.dryRun) return
  const tooSmall: TooSmallWindow[] = []
  for (const link of rule.chain) {
    for (const target of targetsOf([link], identifiers)) {
      for (const { limit, periodMs } of target.windows) {
        if (limit < call.cost) tooSmall.push({ rule: link.name, identifier: target.identifier, limit, periodMs })
      }
    }
  }
  if (tooSmall.length > 0) throw neverFitsError(rule.name, call.cost, tooSmall)
}

/** Identifiers given in any order are charged the same windows, so they share a queue; JSON keeps every character apart. */
function queueKey(rule: string, identifiers: Identifiers): string {
  return JSON.stringify(typeof identifiers === 'string' ? [rule, identifiers] : [rule, ...[...identifiers].sort()])
}
