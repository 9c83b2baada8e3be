import type { Decision, Limiter } from '@tollgate/core'

export const rules = {
  'auth.createToken': {
    windows: [
      { limit: 20, period: '60s' },
      { limit: 5, period: '3s' },
    ],
  },
} as const

/** Login attempts by one client, in seconds from the start: bursts, a pause, then more bursts. */
const ATTEMPTS = [
  0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 3.5, 3.6, 3.7, 3.8, 3.9, 7, 7.1, 7.2, 7.3, 7.4, 10.5, 10.6, 10.7, 10.8, 10.9, 14,
  14.1, 60.1,
]

export interface DemoClock {
  set(ms: number): void
}

/** Plays the attempts against the limiter on a simulated clock and prints one line each. */
export async function runDemo(limiter: Limiter, clock: DemoClock, start: number, print: (line: string) => void) {
  const identifiers = ['ip:203.0.113.7', 'user:42']
  print(`rule auth.createToken: 20 per 60 s and 5 per 3 s, for ${identifiers.join(' and ')}, in one atomic decision`)
  print('')
  print('  time   decision           60 s left  3 s left  retry after')
  for (const at of ATTEMPTS) {
    clock.set(start + Math.round(at * 1000))
    const decision = await limiter.consume('auth.createToken', identifiers)
    print(formatLine(at, decision))
  }
  print('')
  print('Refused attempts charged nothing: once the 60 s window ran out, the 3 s window kept all 5.')
}

function formatLine(at: number, decision: Decision): string {
  // Both identifiers had identical histories here, so the first one's windows tell the story.
  const [minute, burst] = decision.windows
  const refusedBy = decision.windows.filter((w) => w.failed).map((w) => `${w.periodMs / 1000} s`)
  const verdict = decision.allowed ? 'allowed' : `refused by ${[...new Set(refusedBy)].join(', ')}`
  const retry = decision.allowed ? '' : `${(decision.retryAfterMs / 1000).toFixed(1)} s`
  return `  ${at.toFixed(1).padStart(5)}s ${verdict.padEnd(18)} ${String(minute?.remaining).padStart(9)} ${String(burst?.remaining).padStart(9)}  ${retry}`
}
