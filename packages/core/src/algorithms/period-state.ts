import type { Window } from '../rules/rules.js'

/**
 * The counter algorithms' state for one key: per window period a fixed number of values, kept
 * flat in one array `[period, v1, v2, …, period, v1, v2, …]`. A rule has at most eight windows,
 * so a scan is cheap, and one small array per key costs far less memory and garbage collection
 * than a Map of tuples. Entries are found by period, as in the Lua, so a rule whose windows
 * change keeps the periods it still has.
 */
export type PeriodState = number[]

/** The offset of the period's first value, or -1. */
export function valuesOf(state: PeriodState | undefined, period: number, arity: number): number {
  if (state === undefined) return -1
  for (let i = 0; i < state.length; i += arity + 1) {
    if (state[i] === period) return i + 1
  }
  return -1
}

/**
 * The state with the period's values set (a third for the counters that keep three): `at` is
 * their offset (valuesOf), -1 to add them. Values are added in a new array of the exact size:
 * one grown by push or spread keeps room for 16 more values, which every key would hold
 * (bench/README.md), and concat is a call into the runtime.
 */
export function withValues(
  state: PeriodState | undefined,
  at: number,
  period: number,
  first: number,
  second: number,
  third?: number,
): PeriodState {
  if (at >= 0) {
    const into = state as PeriodState
    into[at] = first
    into[at + 1] = second
    if (third !== undefined) into[at + 2] = third
    return into
  }
  if (!state) return third === undefined ? [period, first, second] : [period, first, second, third]
  const n = state.length
  const grown: PeriodState = new Array(n + (third === undefined ? 3 : 4))
  for (let i = 0; i < n; i++) grown[i] = state[i] as number
  grown[n] = period
  grown[n + 1] = first
  grown[n + 2] = second
  if (third !== undefined) grown[n + 3] = third
  return grown
}

/**
 * Moves every window index a faster clock stamped after `now` back to now's window, for the
 * counters whose entries start with a window index. Whether anything moved.
 */
export function clampIndices(
  state: PeriodState | undefined,
  windows: readonly Window[],
  now: number,
  arity: number,
): boolean {
  let moved = false
  for (const window of windows) {
    const at = valuesOf(state, window.periodMs, arity)
    const index = Math.floor(now / window.periodMs)
    if (at >= 0 && ((state as PeriodState)[at] as number) > index) {
      ;(state as PeriodState)[at] = index
      moved = true
    }
  }
  return moved
}
