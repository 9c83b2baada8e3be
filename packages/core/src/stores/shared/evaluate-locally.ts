import { CLAMPED, LIMITED, SHEDS } from '../../algorithms/algorithm.js'
import { algorithms } from '../../algorithms/index.js'
import type { StoreRequest, StoreResult, StoreTarget, StoreWindowResult } from '../store.js'

/** In-process state: what a local store keeps per key (a key string, or whatever the store finds its state by). */
export interface StateTable<Key = string> {
  get(key: Key, now: number): unknown
  set(key: Key, state: unknown, expiresAt: number): void
  delete(key: Key): void
}

/**
 * Each target's state between `read` and `settle`, reused by every decision: a decision runs to
 * its end before another can begin, so it needs no array of its own (`pnpm bench --only
 * allocation` measures what a decision allocates). Emptied as it is read, so that it keeps no
 * state alive.
 */
let states: unknown[] = []

/**
 * The all-or-nothing decision over in-process state: the same steps, in the same order, as
 * `lua/decide.lua`. Synchronous, so no other decision can interleave with it. Each target's
 * algorithm is asked twice, `read` and `settle`, whatever its windows.
 */
export function evaluateLocally<Key>(
  table: StateTable<Key>,
  keys: readonly Key[],
  request: StoreRequest,
  now: number,
): StoreResult {
  const { operation, targets, cost } = request
  const refund = operation === 'refund'
  // Only a decision that can shed carries a random number: one that refunds never does.
  const random = refund ? undefined : request.random
  const count = targets.length
  // Plain loops, no closures: this is the whole cost of an in-process decision.
  if (states.length < count) states = new Array(count)
  // A state a faster clock stamped after now is moved back to now, and written even if nothing
  // is charged: otherwise it would hold this clock back for as long as the clocks disagree.
  let clamped: boolean[] | undefined
  let found = 0
  let windowCount = 0
  for (let t = 0; t < count; t++) {
    const { algorithm, windows } = targets[t] as StoreTarget
    const state = table.get(keys[t] as Key, now)
    states[t] = state
    const bits = algorithms[algorithm].read(state, windows, now, cost, random)
    if ((bits & CLAMPED) !== 0) {
      clamped ??= []
      clamped[t] = true
    }
    found |= bits
    windowCount += windows.length
  }
  // Only a decision that fits may be shed: one that does not is limited, whatever the draw.
  const allowed = refund || (found & LIMITED) === 0
  const shed = allowed && (found & SHEDS) !== 0
  const delta = cost === 0 || shed ? 0 : refund ? -1 : operation === 'consume' && allowed ? 1 : 0
  // Sized up front: the first push into an empty array reserves room for 17.
  const windows: StoreWindowResult[] = new Array(windowCount)
  let w = 0
  for (let t = 0; t < count; t++) {
    const target = targets[t] as StoreTarget
    const algorithm = algorithms[target.algorithm]
    const before = states[t]
    states[t] = undefined
    const state = algorithm.settle(before, target.windows, now, cost, delta, shed ? random : undefined, windows, w)
    w += target.windows.length
    if (delta !== 0 || clamped?.[t] === true) {
      const expiresAt = state === undefined ? 0 : algorithm.expiresAt(state, target.windows)
      if (expiresAt > now) table.set(keys[t] as Key, state, expiresAt)
      else table.delete(keys[t] as Key)
    }
  }
  if (shed) return { allowed: false, shed, nowMs: now, windows }
  return { allowed, nowMs: now, windows }
}
