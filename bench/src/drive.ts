import type { Decider } from './contenders/contender.js'

export interface DriveResult {
  decisions: number
  admitted: number
  errors: number
  firstError: unknown
  seconds: number
  /** This process's CPU time, user and system, in seconds. */
  cpuSeconds: number
}

/**
 * `inFlight` callers, each awaiting its decision before starting the next, until `durationMs`
 * has passed; decisions already started then are awaited and counted.
 */
export function driveFor(
  decider: Decider,
  identifiersOf: (i: number) => readonly string[],
  inFlight: number,
  durationMs: number,
): Promise<DriveResult> {
  const deadline = performance.now() + durationMs
  return drive(decider, identifiersOf, inFlight, () => performance.now() < deadline)
}

/** Exactly `total` decisions, `inFlight` at a time. */
export function driveCount(
  decider: Decider,
  identifiersOf: (i: number) => readonly string[],
  inFlight: number,
  total: number,
): Promise<DriveResult> {
  let started = 0
  return drive(decider, identifiersOf, inFlight, () => started++ < total)
}

async function drive(
  decider: Decider,
  identifiersOf: (i: number) => readonly string[],
  inFlight: number,
  more: () => boolean,
): Promise<DriveResult> {
  const result: DriveResult = { decisions: 0, admitted: 0, errors: 0, firstError: undefined, seconds: 0, cpuSeconds: 0 }
  let next = 0
  const cpu = process.cpuUsage()
  const start = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (more()) {
        try {
          if (await decider.decide(identifiersOf(next++))) result.admitted++
          result.decisions++
        } catch (error) {
          result.errors++
          result.firstError ??= error
        }
      }
    }),
  )
  result.seconds = (performance.now() - start) / 1000
  const used = process.cpuUsage(cpu)
  result.cpuSeconds = (used.user + used.system) / 1e6
  return result
}
