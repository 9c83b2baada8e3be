/** mulberry32: a small generator whose sequence depends only on its seed, so a failure replays exactly. Returns integers in [0, below). */
export function seededRandom(seed: number): (below: number) => number {
  let state = seed >>> 0
  return (below) => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4_294_967_296) * below)
  }
}

/**
 * Numbers in [0, 1) with all 53 bits a double holds, like `Math.random`'s, from `seededRandom`:
 * for a limiter's `random`, so that two limiters given the same seed draw the same sequence.
 */
export function seededUniform(seed: number): () => number {
  const next = seededRandom(seed)
  return () => (next(2 ** 26) * 2 ** 27 + next(2 ** 27)) / 2 ** 53
}
