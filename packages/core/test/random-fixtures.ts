/**
 * Pseudo-random integers below `n` (mulberry32), from a fixed seed: a test that draws its cases
 * from one fails the same way each time it runs.
 */
export function seededRandom(seed: number): (n: number) => number {
  let state = seed
  return (n) => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4_294_967_296) * n)
  }
}
