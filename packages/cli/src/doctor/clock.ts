import { span } from '../format.js'
import type { Check } from './check.js'

/**
 * Stores decide on Redis's TIME by default, so that app servers' clocks do not matter; a store
 * given `clock: () => Date.now()` stamps state with this machine's instead, and a skew past this
 * moves a one-second window by a quarter of it.
 */
export const SKEW_WARN_MS = 250
const SAMPLES = 5

export const clock: Check = {
  name: 'clock',
  async run(connection) {
    // The sample with the shortest round trip bounds the skew best: its midpoint is closest to when Redis read its clock.
    let best: { skewMs: number; roundTripMs: number } | undefined
    for (let i = 0; i < SAMPLES; i++) {
      // Wall time to the microsecond, as TIME gives it: Date.now() truncates to the millisecond.
      const sentAt = performance.timeOrigin + performance.now()
      const [seconds, micros] = await connection.client.time()
      const roundTripMs = performance.timeOrigin + performance.now() - sentAt
      const serverMs = Number(seconds) * 1_000 + Number(micros) / 1_000
      const skewMs = serverMs - (sentAt + roundTripMs / 2)
      if (best === undefined || roundTripMs < best.roundTripMs) best = { skewMs, roundTripMs }
    }
    const { skewMs, roundTripMs } = best as { skewMs: number; roundTripMs: number }
    const details = { skewMs: round(skewMs), roundTripMs: round(roundTripMs) }
    const direction = skewMs >= 0 ? 'ahead of' : 'behind'
    const text = `Redis TIME is ${span(Math.abs(skewMs))} ${direction} this machine (±${span(roundTripMs / 2)}, round trip ${span(roundTripMs)})`
    if (Math.abs(skewMs) - roundTripMs / 2 > SKEW_WARN_MS) {
      return {
        status: 'warn',
        message: `${text}: stores on Redis's TIME (the default) do not mind; a store given clock: () => Date.now() here would stamp state that far off`,
        details,
      }
    }
    return { status: 'ok', message: text, details }
  },
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100
}
