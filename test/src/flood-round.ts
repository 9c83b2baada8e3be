import type { AlgorithmName } from '@tollgate/core'

/** What each flood worker does in one round: consumes fired at once on one limiter at its defaults. */
export interface FloodRound {
  algorithm: AlgorithmName
  prefix: string
  /** Per hour. */
  limit: number
  /** Consumes this process fires at once. */
  decisions: number
  /** `one`: every consume for `ip:203.0.113.7`; `distinct`: consume `i` for identifier `i`. */
  identifiers: 'one' | 'distinct'
  refusalCache: boolean
}

/** Decisions by reason. */
export type FloodResult = Record<string, number>
