import type { Contender, StoreKind } from '../contenders/contender.js'
import { CONTENDERS, contenderById } from '../contenders/index.js'
import type { DecisionCell, DecisionScenario } from '../measures/decisions.js'
import { median } from '../stats.js'

export function contenderOf(id: string): Contender {
  return contenderById(id)
}

export function sameScenario(a: DecisionScenario, b: DecisionScenario): boolean {
  return a.shape === b.shape && a.spread === b.spread && a.inFlight === b.inFlight
}

/** The fastest incumbent's one-window cell for a store and the key spread and concurrency of `scenario`. */
export function fastestIncumbent(
  cells: readonly DecisionCell[],
  store: StoreKind,
  scenario: DecisionScenario,
): DecisionCell | undefined {
  const candidates = cells.filter((cell) => {
    const contender = contenderOf(cell.contender)
    return (
      contender.role === 'incumbent' &&
      contender.store === store &&
      sameScenario(cell, { ...scenario, shape: 'one-window' })
    )
  })
  return candidates.sort((a, b) => median(b.perSecond) - median(a.perSecond))[0]
}

export function ceilingCell(cells: readonly DecisionCell[], scenario: DecisionScenario): DecisionCell | undefined {
  return cells.find(
    (cell) =>
      contenderOf(cell.contender).role === 'ceiling' && sameScenario(cell, { ...scenario, shape: 'one-window' }),
  )
}

export function tollgateIds(store: StoreKind): string[] {
  return CONTENDERS.filter((c) => c.role === 'tollgate' && c.store === store).map((c) => c.id)
}

/**
 * The algorithm a Tollgate contender runs, marked `(hybrid)` for the HybridStore's, which share
 * the in-memory rows, and `(node-redis)` for the RedisStore on a node-redis client.
 */
export function algorithmOf(id: string): string {
  const parts = id.split('/')
  const algorithm = parts.at(-1) as string
  return parts[1] === 'hybrid' || parts[1] === 'node-redis' ? `${algorithm} (${parts[1]})` : algorithm
}
