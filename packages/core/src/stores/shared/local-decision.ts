import type { Decision, WindowState } from '../../rules/decision.js'
import type { Rule, Window } from '../../rules/rules.js'
import type { StoreOperation, StoreWindowResult } from '../store.js'
import type { Identifiers, TargetSlot } from './decision-targets.js'
import { ALLOWED, BLOCKED, SHED } from './evaluate-locally.js'

/** One call, as a limiter resolved it before asking its store. */
export interface LocalCall {
  readonly rule: Rule
  readonly operation: StoreOperation
  readonly identifiers: Identifiers
  readonly cost: number
  /** The decision's one random number in [0, 1), when it can shed (StoreRequest.random). */
  readonly random: number | undefined
  /** Whether its targets carry their rules' blocks, for a decision that enforces them. */
  readonly blocks: boolean
  /** Whether a refusal is answered as allowed, reason `dry-run`. */
  readonly dryRun: boolean
}

/**
 * A store that keeps its state in the process and makes a limiter's decision itself, in one pass
 * from the call's targets to its `Decision`: no request, no store result and no second copy of
 * each window's answer. Not part of the `Store` interface: a store of another copy of core, or
 * of its user, is asked through `evaluateSync` instead.
 */
export const DECIDES_IN_PROCESS: unique symbol = Symbol('tollgate.decidesInProcess') as never

export interface DecidesInProcess {
  /**
   * The decision over the call's `count` targets, as `fillTargets` wrote them; undefined leaves it
   * to the store's request path (`evaluateSync`, then the shared store). Throws as `evaluateSync` does.
   */
  [DECIDES_IN_PROCESS](call: LocalCall, targets: readonly TargetSlot[], count: number): Decision | undefined
}

/**
 * The decision `decideLocally`'s bits and answers make: each window reported under the name of
 * the rule of the chain its target belongs to.
 */
export function localDecisionOf(
  call: LocalCall,
  targets: readonly TargetSlot[],
  count: number,
  bits: number,
  nowMs: number,
  answers: readonly StoreWindowResult[],
): Decision {
  const allowed = (bits & ALLOWED) !== 0
  let windowCount = 0
  for (let t = 0; t < count; t++) windowCount += (targets[t] as TargetSlot).windows.length
  // Sized up front: the first push into an empty array reserves room for 17.
  const windows: WindowState[] = new Array(windowCount)
  let retryAt = nowMs
  let i = 0
  for (let t = 0; t < count; t++) {
    const { link, identifier, windows: its } = targets[t] as TargetSlot
    const rule = link.name
    for (let k = 0; k < its.length; k++) {
      const { limit, periodMs } = its[k] as Window
      const { remaining, resetAtMs, fitsAtMs } = answers[i] as StoreWindowResult
      // windowStateOf's object, made here: a call per window costs more than the object.
      const failed = !allowed && fitsAtMs > nowMs
      if (failed && fitsAtMs > retryAt) retryAt = fitsAtMs
      windows[i++] = { rule, identifier, limit, periodMs, remaining, resetAtMs, failed }
    }
  }
  return decisionFrom(call, bits, nowMs, retryAt, windows)
}

/** A window of a decision as its store answered it: failed when the decision was refused and it did not fit then. */
export function windowStateOf(
  rule: string,
  identifier: string,
  window: Window,
  answer: StoreWindowResult,
  allowed: boolean,
  nowMs: number,
): WindowState {
  return {
    rule,
    identifier,
    limit: window.limit,
    periodMs: window.periodMs,
    remaining: answer.remaining,
    resetAtMs: answer.resetAtMs,
    failed: !allowed && answer.fitsAtMs > nowMs,
  }
}

/**
 * The decision over its windows, `bits` saying how it went (ALLOWED, SHED, BLOCKED), `retryAt`
 * the latest time a failed window fits; a refusal in dry run is answered as allowed.
 */
export function decisionFrom(
  call: Pick<LocalCall, 'rule' | 'cost' | 'dryRun'>,
  bits: number,
  nowMs: number,
  retryAt: number,
  windows: WindowState[],
): Decision {
  const allowed = (bits & ALLOWED) !== 0
  if (!allowed && call.dryRun) {
    // Allowed, so nothing to wait for: a client told to retry later would hold back for nothing.
    return { allowed: true, reason: 'dry-run', rule: call.rule.name, cost: call.cost, retryAfterMs: 0, nowMs, windows }
  }
  return {
    allowed,
    reason: allowed ? 'ok' : bits === BLOCKED ? 'blocked' : bits === SHED ? 'shed' : 'limited',
    rule: call.rule.name,
    cost: call.cost,
    retryAfterMs: retryAt - nowMs,
    nowMs,
    windows,
  }
}
