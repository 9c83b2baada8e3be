import { describe, expect, it } from 'vitest'
import { type SlidingLogState, slidingLog } from '../src/algorithms/sliding-log.js'
import type { Window } from '../src/rules/windows.js'
import { seededRandom } from './random-fixtures.js'

/** A log as a plain list of every admitted request, the model the kept state must agree with. */
class ReferenceLog {
  private entries: Array<{ at: number; units: number }> = []

  charge(now: number, cost: number, longest: number): void {
    this.entries = this.entries.filter((entry) => entry.at > now - longest)
    this.entries.push({ at: now, units: cost })
  }

  used(now: number, periodMs: number): number {
    let sum = 0
    for (const entry of this.entries) if (entry.at > now - periodMs) sum += entry.units
    return sum
  }

  /** The entries any window still counts. */
  live(now: number, longest: number): number {
    return this.entries.filter((entry) => entry.at > now - longest).length
  }
}

describe('sliding log held at its limit', () => {
  const windows: readonly Window[] = [
    { limit: 500, periodMs: 2_000 },
    { limit: 2_000, periodMs: 10_000 },
  ]
  const longest = 10_000

  // At its limit, a log drops an entry for every one it adds. Dropped entries are cut off the
  // front of its arrays in one go, so that no charge moves every entry the log holds: this run
  // attacks the cut, charge after charge, at every length the log goes through.
  it('counts what the plain list of requests counts, and keeps at most twice its live entries', () => {
    const random = seededRandom(7)
    const reference = new ReferenceLog()
    let state: SlidingLogState | undefined
    let now = 1_700_000_000_000
    let cuts = 0
    let admitted = 0
    let refused = 0
    for (let step = 0; step < 20_000; step++) {
      now += random(8)
      const cost = random(20) === 0 ? 1 + random(30) : 1
      const fits = windows.every((window) => slidingLog.fitsAt(state, window, now, cost) === now)
      const expected = windows.every((window) => reference.used(now, window.periodMs) + cost <= window.limit)
      expect(fits, `step ${step}`).toBe(expected)
      if (!fits) {
        refused++
        continue
      }
      const before = state?.start ?? 0
      state = slidingLog.charge(state, windows, now, cost)
      reference.charge(now, cost, longest)
      admitted++
      if (state.start < before) cuts++
      for (const window of windows) {
        expect(slidingLog.used(state, window, now), `step ${step}, ${window.periodMs} ms`).toBe(
          reference.used(now, window.periodMs),
        )
      }
      const live = reference.live(now, longest)
      expect(state.times.length - state.start).toBe(live)
      expect(state.times.length, `step ${step}`).toBeLessThanOrEqual(2 * live)
    }
    // Far more admitted than the longest window holds, the log turning over many times, and
    // requests refused all along: the log was held at its limit.
    expect(admitted).toBeGreaterThan(5 * 2_000)
    expect(refused).toBeGreaterThan(1_000)
    // A cut comes once the dropped entries are as many as those kept: a few over this run.
    expect(cuts).toBeGreaterThanOrEqual(4)
  })

  it('refunds only entries still kept, and is empty once they are all given back', () => {
    let state: SlidingLogState | undefined
    const window = { limit: 100, periodMs: 1_000 }
    for (let t = 0; t < 40; t++) state = slidingLog.charge(state, [window], 1_000 + t * 100, 1)
    const kept = state as SlidingLogState
    const now = 1_000 + 39 * 100
    // Charges since the window's start are kept; those before it were dropped.
    expect(slidingLog.used(kept, window, now)).toBe(10)
    expect(kept.start).toBeGreaterThan(0)
    const after = slidingLog.refund(kept, [window], now, 25) as SlidingLogState
    expect(slidingLog.used(after, window, now)).toBe(0)
    expect(after.times.length).toBe(after.start)
    expect(slidingLog.expiresAt(after, [window])).toBe(0)
  })
})
