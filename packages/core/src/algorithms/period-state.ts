import type { Window } from '../rules.js'

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
  if (!state) return -1
  for (let i = 0; i < state.length; i += arity + 1) {
    if (state[i] === period) return i + 1
  }
  return -1
}

export function store(state: PeriodState, period: number, values: readonly number[]): void {
  const at = valuesOf(state, period, values.length)
  if (at < 0) {
    state.push(period, ...values)
    return
  }
  for (let j = 0; j < values.length; j++) state[at + j] = values[j] as number
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
