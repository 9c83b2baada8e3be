import type { RuleBlock } from '../rules/block.js'
import type { Window } from '../rules/rules.js'

/**
 * What a rule with `block` keeps per identifier, beside its windows' state: the block in force
 * or last served, and the refusals counted toward the next. `lua/lib/lockout.lua` keeps the same
 * five numbers, in this order, as the text of the key beside the state's (`<key>:block`).
 */
export interface LockoutState {
  /** When the block in force, or the last one, ends (ms); 0 before any. */
  until: number
  /** How long that block lasted: a next one within as long after it ends is `factor` times longer. */
  lastMs: number
  /** Refusals by the windows since `firstAt`, toward `after`. */
  refusals: number
  firstAt: number
  /** The window whose refusal started the block, by index: a blocked decision marks it failed. */
  window: number
}

/** When the identifier's block ends, if one is in force at `now`; 0 if none is. */
export function blockedUntil(state: LockoutState | undefined, now: number): number {
  return state !== undefined && state.until > now ? state.until : 0
}

/**
 * The state after the rule's window `window` refused the identifier at `now` (with no block in
 * force): one more refusal counted, since `firstAt` unless the rule's longest period has passed
 * since, and at `after` of them a block, `factor` times the last while that is remembered.
 */
export function afterRefusal(
  state: LockoutState | undefined,
  block: RuleBlock,
  windows: readonly Window[],
  now: number,
  window: number,
): LockoutState {
  const counting = state !== undefined && state.refusals > 0 && now < state.firstAt + longestPeriod(windows)
  const refusals = counting ? state.refusals + 1 : 1
  const lastUntil = state?.until ?? 0
  const lastMs = state?.lastMs ?? 0
  if (refusals < block.after) {
    return { until: lastUntil, lastMs, refusals, firstAt: counting ? state.firstAt : now, window: state?.window ?? 0 }
  }
  const remembered = lastMs > 0 && now < lastUntil + lastMs
  const length = remembered ? Math.min(block.maxMs, Math.floor(lastMs * block.factor)) : block.forMs
  return { until: now + length, lastMs: length, refusals: 0, firstAt: 0, window }
}

/** From this time on the state says nothing: no block in force or remembered, no refusal counted. */
export function lockoutExpiresAt(state: LockoutState, windows: readonly Window[]): number {
  const remembered = state.lastMs > 0 ? state.until + state.lastMs : 0
  const counted = state.refusals > 0 ? state.firstAt + longestPeriod(windows) : 0
  return Math.max(remembered, counted)
}

function longestPeriod(windows: readonly Window[]): number {
  let longest = 0
  for (const window of windows) if (window.periodMs > longest) longest = window.periodMs
  return longest
}
