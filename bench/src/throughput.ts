import type { Limiter } from '@tollgate/core'

/** Decisions per second with `inFlight` concurrent callers, each awaiting its previous decision. */
export async function decisionsPerSecond(
  limiter: Limiter,
  rule: string,
  identifiersOf: (i: number) => string[],
  inFlight: number,
  durationMs: number,
): Promise<number> {
  let issued = 0
  let done = 0
  const deadline = performance.now() + durationMs
  const start = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        await limiter.consume(rule, identifiersOf(issued++))
        done++
      }
    }),
  )
  return done / ((performance.now() - start) / 1000)
}
