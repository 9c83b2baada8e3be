import type { DriveResult } from '../drive.js'

/** What a cell of decisions per second holds over its repetitions (sections 1 and 11). */
export interface RunTally {
  /** Per repetition. */
  perSecond: number[]
  /** The deciding process's CPU per decision, µs, per repetition. */
  clientCpuUs: number[]
  /** Redis's CPU per decision, µs, per repetition. */
  redisCpuUs: number[]
  decisions: number
  refused: number
  errors: number
  firstError?: string
}

/** A tally with no run yet. */
export function emptyTally(): RunTally {
  return { perSecond: [], clientCpuUs: [], redisCpuUs: [], decisions: 0, refused: 0, errors: 0 }
}

/** One measured run added to its cell, `redisSeconds` the CPU Redis spent meanwhile. */
export function addRun(cell: RunTally, run: DriveResult, redisSeconds: number): void {
  cell.perSecond.push(run.decisions / run.seconds)
  cell.clientCpuUs.push((run.cpuSeconds / Math.max(1, run.decisions)) * 1e6)
  cell.redisCpuUs.push((redisSeconds / Math.max(1, run.decisions)) * 1e6)
  cell.decisions += run.decisions
  cell.refused += run.decisions - run.admitted
  cell.errors += run.errors
  if (run.firstError !== undefined && cell.firstError === undefined) cell.firstError = String(run.firstError)
}
