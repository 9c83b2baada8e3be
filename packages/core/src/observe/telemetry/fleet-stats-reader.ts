import { DECISION_OUTCOMES, type DecisionOutcome } from '../metrics/outcomes.js'
import { fleetStatsKeys } from './fleet-stats-keys.js'

/** The reads a fleet-stats reader sends (ioredis `Redis` or `Cluster`). */
export interface FleetStatsReadClient {
  hgetall(key: string): Promise<Record<string, string>>
  smembers(key: string): Promise<string[]>
  zrevrange(key: string, start: number, stop: number, withScores: 'WITHSCORES'): Promise<string[]>
  zrangebyscore(key: string, min: number | string, max: number | string): Promise<string[]>
}

/** One rule's decisions in one second, summed over the fleet. */
export interface RuleSecondCounts {
  decisions: Partial<Record<DecisionOutcome, number>>
  /** Refusals by window (`60s`). */
  denials: Record<string, number>
}

export interface FleetSecond {
  /** Epoch seconds. */
  second: number
  rules: Record<string, RuleSecondCounts>
  storeErrors: number
}

/**
 * The fleet's counts of the seconds from `fromSecond` to `toSecond` (epoch seconds, inclusive),
 * oldest first; a second no process wrote is empty.
 */
export async function readFleetSeconds(
  client: FleetStatsReadClient,
  prefix: string,
  fromSecond: number,
  toSecond: number,
): Promise<FleetSecond[]> {
  const keys = fleetStatsKeys(prefix)
  const seconds: number[] = []
  for (let second = fromSecond; second <= toSecond; second++) seconds.push(second)
  const hashes = await Promise.all(seconds.map((second) => client.hgetall(keys.second(second))))
  return seconds.map((second, i) => {
    const counts: FleetSecond = { second, rules: {}, storeErrors: 0 }
    for (const [field, value] of Object.entries(hashes[i] ?? {})) {
      const parts = field.split('\t')
      const count = Number(value)
      if (parts[0] === 'store' && parts[1] === 'errors') {
        counts.storeErrors += count
        continue
      }
      const name = parts[0] as string
      let rule = counts.rules[name]
      if (rule === undefined) {
        rule = { decisions: {}, denials: {} }
        counts.rules[name] = rule
      }
      if (parts.length === 2 && (DECISION_OUTCOMES as readonly string[]).includes(parts[1] as string)) {
        const outcome = parts[1] as DecisionOutcome
        rule.decisions[outcome] = (rule.decisions[outcome] ?? 0) + count
      } else if (parts.length === 3 && parts[2] === 'denied') {
        rule.denials[parts[1] as string] = (rule.denials[parts[1] as string] ?? 0) + count
      }
    }
    return counts
  })
}

export interface RefusedIdentifier {
  rule: string
  identifier: string
  /** Refusals the processes' sketches counted (each may overcount by its sketch's error). */
  refusals: number
}

/**
 * The most refused identifiers of the last `sinceMs`, per rule (or of one rule), heaviest first,
 * merged over the fleet's lists of each `topIntervalMs` span.
 */
export async function readTopRefused(
  client: FleetStatsReadClient,
  prefix: string,
  options: { sinceMs: number; nowMs?: number; topIntervalMs?: number; rule?: string; limit?: number },
): Promise<RefusedIdentifier[]> {
  const keys = fleetStatsKeys(prefix)
  const interval = options.topIntervalMs ?? 10_000
  const now = options.nowMs ?? Date.now()
  const limit = options.limit ?? 20
  const spans: number[] = []
  for (let span = Math.floor((now - options.sinceMs) / interval); span <= Math.floor(now / interval); span++) {
    spans.push(span)
  }
  const merged = new Map<string, Map<string, number>>()
  await Promise.all(
    spans.map(async (span) => {
      const rules = options.rule !== undefined ? [options.rule] : await client.smembers(keys.topRules(span))
      await Promise.all(
        rules.map(async (rule) => {
          const flat = await client.zrevrange(keys.top(rule, span), 0, -1, 'WITHSCORES')
          let byIdentifier = merged.get(rule)
          if (byIdentifier === undefined) {
            byIdentifier = new Map()
            merged.set(rule, byIdentifier)
          }
          for (let i = 0; i < flat.length; i += 2) {
            const identifier = flat[i] as string
            byIdentifier.set(identifier, (byIdentifier.get(identifier) ?? 0) + Number(flat[i + 1]))
          }
        }),
      )
    }),
  )
  const top: RefusedIdentifier[] = []
  for (const [rule, byIdentifier] of merged) {
    const heaviest = [...byIdentifier].sort((a, b) => b[1] - a[1]).slice(0, limit)
    for (const [identifier, refusals] of heaviest) top.push({ rule, identifier, refusals })
  }
  return top.sort((a, b) => b.refusals - a.refusals || a.rule.localeCompare(b.rule))
}

export interface FleetProcess {
  instance: string
  /** When it last wrote (ms). */
  atMs: number
  /**
   * Its HybridStore's `stats()`, when its limiter runs on one, with the counts by rule
   * (`overAdmittedByRule`, `leaseRoundTripsByRule`) by rule name, as the fleet's counts are, not by state name.
   */
  hybrid?: Record<string, unknown>
}

/** The processes that wrote within `liveMs` of `nowMs`. */
export async function readFleetProcesses(
  client: FleetStatsReadClient,
  prefix: string,
  options: { liveMs?: number; nowMs?: number } = {},
): Promise<FleetProcess[]> {
  const keys = fleetStatsKeys(prefix)
  const now = options.nowMs ?? Date.now()
  const instances = await client.zrangebyscore(keys.processes, now - (options.liveMs ?? 3_000), '+inf')
  const hashes = await Promise.all(instances.map((instance) => client.hgetall(keys.process(instance))))
  return instances.flatMap((instance, i) => {
    const hash = hashes[i] ?? {}
    if (hash.at === undefined) return []
    const process: FleetProcess = { instance, atMs: Number(hash.at) }
    if (hash.hybrid !== undefined) process.hybrid = JSON.parse(hash.hybrid) as Record<string, unknown>
    return [process]
  })
}
