/**
 * mulberry32: a small generator whose sequence depends only on its seed, so a failure replays
 * exactly. Returns integers in [0, below). The suite's one generator: `test/src/seeded-random.ts`
 * passes it on to the tests beside the harness.
 */
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
