import { seededRandom } from '../../packages/core/test/random-fixtures.js'

export { seededRandom }

/**
 * Numbers in [0, 1) with all 53 bits a double holds, like `Math.random`'s, from `seededRandom`:
 * for a limiter's `random`, so that two limiters given the same seed draw the same sequence.
 */
export function seededUniform(seed: number): () => number {
  const next = seededRandom(seed)
  return () => (next(2 ** 26) * 2 ** 27 + next(2 ** 27)) / 2 ** 53
}
