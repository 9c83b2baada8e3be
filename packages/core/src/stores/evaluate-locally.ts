import { algorithms } from '../algorithms/index.js'
import { shedRetryAt, sheds } from '../algorithms/shedding.js'
import type { StoreRequest, StoreResult, StoreWindowResult } from './store.js'

/** In-process state: what a local store keeps per key (a key string, or whatever the store finds its state by). */
export interface StateTable<Key = string> {
  get(key: Key, now: number): unknown
  set(key: Key, state: unknown, expiresAt: number): void
  delete(key: Key): void
}

/**
 * The all-or-nothing decision over in-process state: the same steps, in the same order, as
 * `lua/decide.lua`. Synchronous, so no other decision can interleave with it.
 */
export function evaluateLocally<Key>(
  table: StateTable<Key>,
  keys: readonly Key[],
  request: StoreRequest,
  now: number,
): StoreResult {
  const { operation, targets, cost } = request
  // Plain loops, no closures: this is the whole cost of an in-process decision.
  const states: unknown[] = new Array(targets.length)
  // State a faster clock stamped after now is moved back to now, and written even if nothing
  // is charged: otherwise it would hold this clock back for as long as the clocks disagree.
  let clamped: boolean[] | undefined
  for (let t = 0; t < targets.length; t++) {
    const { algorithm, windows } = targets[t] as (typeof targets)[number]
    states[t] = table.get(keys[t] as Key, now)
    if (algorithms[algorithm].clamp(states[t], windows, now)) {
      clamped ??= []
      clamped[t] = true
    }
  }
  let allowed = true
  if (operation !== 'refund') {
    for (let t = 0; t < targets.length && allowed; t++) {
      const { algorithm, windows } = targets[t] as (typeof targets)[number]
      for (const window of windows) {
        if (algorithms[algorithm].fitsAt(states[t], window, now, cost) !== now) {
          allowed = false
          break
        }
      }
    }
  }
  // Only a decision that fits may be shed: one that does not is limited, whatever the draw.
  const { random } = request
  let shed = false
  if (allowed && random !== undefined && operation !== 'refund') {
    for (let t = 0; t < targets.length && !shed; t++) {
      const { algorithm, windows } = targets[t] as (typeof targets)[number]
      for (const window of windows) {
        if (sheds(algorithms[algorithm], states[t], window, now, cost, random)) {
          shed = true
          break
        }
      }
    }
    if (shed) allowed = false
  }
  const writes = (operation === 'consume' && allowed && cost > 0) || (operation === 'refund' && cost > 0)
  let count = 0
  for (let t = 0; t < targets.length; t++) count += (targets[t] as (typeof targets)[number]).windows.length
  // Sized up front: the first push into an empty array reserves room for 17.
  const windows: StoreWindowResult[] = new Array(count)
  let w = 0
  for (let t = 0; t < targets.length; t++) {
    const target = targets[t] as (typeof targets)[number]
    const algorithm = algorithms[target.algorithm]
    let state = states[t]
    if (writes || clamped?.[t]) {
      if (writes) {
        state =
          operation === 'refund'
            ? algorithm.refund(state, target.windows, now, cost)
            : algorithm.charge(state, target.windows, now, cost)
      }
      const expiresAt = state === undefined ? 0 : algorithm.expiresAt(state, target.windows)
      if (expiresAt > now) table.set(keys[t] as Key, state, expiresAt)
      else table.delete(keys[t] as Key)
    }
    for (const window of target.windows) {
      const answer = algorithm.answer(state, window, now, cost)
      if (shed && sheds(algorithm, state, window, now, cost, random as number)) {
        answer.fitsAtMs = shedRetryAt(algorithm, state, window, now, cost)
      }
      windows[w++] = answer
    }
  }
  if (shed) return { allowed: false, shed, nowMs: now, windows }
  return { allowed: operation === 'refund' || allowed, nowMs: now, windows }
}
