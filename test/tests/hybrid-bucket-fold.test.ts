import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { bucket, scaleOf } from '../../packages/core/src/algorithms/bucket.js'
import type { Window } from '../../packages/core/src/rules/rules.js'
import { syncScript } from '../../packages/core/src/scripts/generated.js'
import { applyFolded, foldAfter, foldedOf } from '../../packages/core/src/stores/hybrid/bucket-fold.js'
import { SyncEntries } from '../../packages/core/src/stores/hybrid/sync-wire.js'
import { decodeCounterState, toModelState } from '../../packages/core/src/stores/shared/redis-state.js'
import { seededRandom } from '../src/seeded-random.js'

// A bucket's units reach Redis folded (stores/hybrid-bucket-fold.ts, lua/lib/bucket.lua): two
// values per window, however many charges. Held here against the segments they replace, each
// pushed by the sync script on a real Redis: the same value when Redis last measured the bucket
// before the units began, never less used otherwise, and the process's own replay of the fold
// (after a sync) ends where the script does.

const T0 = 1_700_000_000_000
const RULES: Window[][] = [
  [{ limit: 5, periodMs: 1_000 }],
  [
    { limit: 3_000, periodMs: 1_000 },
    { limit: 100_000, periodMs: 60_000 },
  ],
  [{ limit: 1_000_000_000, periodMs: 60_000 }],
  [
    { limit: 7, periodMs: 3_000 },
    { limit: 20, periodMs: 60_000 },
  ],
]
const CASES = 400

interface Case {
  windows: Window[]
  /** Segments pushed first, to both keys: the state Redis holds before. */
  before: number[]
  units: number[]
  now: number
}

/** Segments `at, units, …` from `at` on: gaps of nothing, a few ms or seconds; now and then a refund. */
function segmentsFrom(random: (below: number) => number, at: number, count: number): number[] {
  const segments: number[] = []
  let time = at
  for (let i = 0; i < count; i++) {
    const gap = [0, 1, 1 + random(5), 10 + random(300), 1_000 + random(5_000)][random(5)] as number
    if (i > 0) time += gap
    const units = random(8) === 0 ? -(1 + random(2)) : 1 + random(3)
    segments.push(time, units)
  }
  return segments
}

function caseOf(seed: number, measuredAfterFirst: boolean): Case {
  const random = seededRandom(seed)
  const windows = RULES[random(RULES.length)] as Window[]
  const before = random(4) === 0 ? [] : segmentsFrom(random, T0, 1 + random(6))
  const lastBefore = before.length > 0 ? (before[before.length - 2] as number) : T0
  // Measured after the units' first time: they began before another process's last push.
  const first = measuredAfterFirst ? lastBefore - 1 - random(2_000) : lastBefore + random(3_000)
  const units = segmentsFrom(random, first, 1 + random(40))
  const lastUnits = units[units.length - 2] as number
  return { windows, before, units, now: Math.max(lastBefore, lastUnits) + random(100) }
}

describe('a bucket’s units folded, against the segments they replace', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  // The script gives the key a TTL from the simulated clock, as little as 100 ms, which runs out
  // on the real one: on a busy machine a key expired between two steps of a case. Each push
  // persists the key in the same transaction, so nothing expires while a case runs.
  async function push(key: string, windows: Window[], pushed: number[], now: number): Promise<void> {
    const entries = new SyncEntries()
    entries.add('token-bucket', windows, pushed)
    const replies = await client
      .multi()
      .eval(syncScript.lua, 1, key, String(now), '', '', `[${entries.entries.join(',')}]`)
      .persist(key)
      .exec()
    const failed = replies?.find(([error]) => error !== null)
    if (replies === null || failed !== undefined) throw failed?.[0] ?? new Error('the push transaction was aborted')
  }

  async function pushBoth(
    at: number,
    c: Case,
  ): Promise<{ segments: string | null; folded: string | null; start: string | null }> {
    const segmentsKey = `fold:{${at}}:s`
    const foldedKey = `fold:{${at}}:f`
    if (c.before.length > 0) {
      const lastBefore = c.before[c.before.length - 2] as number
      await push(segmentsKey, c.windows, c.before, lastBefore)
      await push(foldedKey, c.windows, c.before, lastBefore)
    }
    const start = await client.get(foldedKey)
    await push(segmentsKey, c.windows, c.units, c.now)
    await push(foldedKey, c.windows, foldedOf(c.windows, c.units), c.now)
    const [segments, folded] = await client.mget(segmentsKey, foldedKey)
    await client.del(segmentsKey, foldedKey)
    return { segments: segments ?? null, folded: folded ?? null, start }
  }

  function model(windows: Window[], value: string | null): number[] | undefined {
    return toModelState('token-bucket', windows, decodeCounterState('token-bucket', windows, value), true)
  }

  /** The window's level at `at` in the model's state: full with no state, a key Redis let expire. */
  function levelAt(state: number[] | undefined, window: Window, at: number): number {
    return scaleOf(window).capacity - bucket.used(state, window, at)
  }

  it(`${CASES} cases measured at or before the units' first time: the same value as the segments, and the process's replay agrees`, async () => {
    for (let seed = 1; seed <= CASES; seed++) {
      const c = caseOf(seed, false)
      const { segments, folded, start } = await pushBoth(seed, c)
      expect(folded, `seed ${seed}`).toBe(segments)
      const replayed = applyFolded(model(c.windows, start), c.windows, foldedOf(c.windows, c.units))
      for (const window of c.windows) {
        expect(levelAt(replayed, window, c.now), `seed ${seed}`).toBe(levelAt(model(c.windows, folded), window, c.now))
      }
    }
  })

  it(`${CASES} cases: units a failed push put back before those admitted since fold as if they had never been apart`, () => {
    for (let seed = 1; seed <= CASES; seed++) {
      const random = seededRandom(20_000 + seed)
      const { windows, units } = caseOf(20_000 + seed, false)
      const cut = 2 * random(units.length / 2 + 1)
      const earlier = foldedOf(windows, units.slice(0, Math.max(2, cut)))
      const later = units.slice(Math.max(2, cut))
      if (later.length > 0) foldAfter(earlier, windows, random(2) === 0 ? later : foldedOf(windows, later))
      expect(earlier, `seed ${20_000 + seed}`).toEqual(foldedOf(windows, units))
    }
  })

  it(`${CASES} cases measured after the units' first time: never less used than the segments, by no more than the refill before that measurement`, async () => {
    let differed = 0
    for (let seed = 1; seed <= CASES; seed++) {
      const c = caseOf(10_000 + seed, true)
      const { segments, folded } = await pushBoth(10_000 + seed, c)
      const bySegments = model(c.windows, segments)
      const byFold = model(c.windows, folded)
      const measured = c.before.length > 0 ? (c.before[c.before.length - 2] as number) : (c.units[0] as number)
      for (const window of c.windows) {
        const { perMs } = scaleOf(window)
        const levelBySegments = levelAt(bySegments, window, c.now)
        const levelByFold = levelAt(byFold, window, c.now)
        expect(levelByFold, `seed ${10_000 + seed}`).toBeLessThanOrEqual(levelBySegments)
        expect(levelBySegments - levelByFold, `seed ${10_000 + seed}`).toBeLessThanOrEqual(
          Math.max(0, measured - (c.units[0] as number)) * perMs,
        )
        if (levelByFold !== levelBySegments) differed++
      }
    }
    // The cases reach the edge they are about.
    expect(differed).toBeGreaterThan(0)
  })
})
