import type { AlgorithmName } from '@tollgate/core'

/** What each exactness worker does in one round: concurrent consumes of one rule `hot`, limit per hour. */
export interface ExactnessRound {
  algorithm: AlgorithmName
  prefix: string
  /** A fixed clock's milliseconds, which keep windows still while processes race; or the server's TIME. */
  now: number | 'server'
  limit: number
  /** Consumes this process fires at once. */
  decisions: number
  /** Consume `i` is for `identifiers[i % identifiers.length]`. */
  identifiers: string[][]
}

export interface ExactnessResult {
  admitted: number
  /** Admitted consumes per entry of the round's `identifiers`. */
  admittedPerSet: number[]
  /** Decisions the store failed (policy 'deny'): none is expected. */
  failed: number
}
