import {
  DECISION_OUTCOMES,
  type DecisionOutcome,
  type FleetProcess,
  type FleetSecond,
  type RefusedIdentifier,
  readFleetProcesses,
  readFleetSeconds,
  readTopRefused,
} from '@tollgate/core'
import type { OffenderHandles } from './offender-handles.js'
import type { AdminConfig } from './options.js'
import type { RulesInForce, RulesView } from './rules-in-force.js'

/** The seconds the chart and the refusal counts cover. */
export const HISTORY_SECONDS = 60
/** The span the most refused identifiers are counted over. */
export const TOP_SINCE_MS = 5 * 60_000
/** The identifiers listed. */
export const TOP_LIMIT = 20

/** One second of the fleet's decisions, summed over its rules. */
export interface SecondView {
  /** Epoch seconds. */
  second: number
  decisions: Partial<Record<DecisionOutcome, number>>
  storeErrors: number
}

export interface RefusalsView {
  rule: string
  /** The refusing window, as `60s`. */
  window: string
  /** Refusals in the last second shown. */
  lastSecond: number
  /** Refusals over the seconds shown (the last minute). */
  lastMinute: number
}

/** What a process's HybridStore said at its last write; absent for other stores. */
export interface HybridView {
  /** Since its last good sync with Redis. */
  stalenessMs: number
  mode: string
  /** Live processes at its last good sync. */
  instances: number
  trackedKeys: number
  /** Units it pushed above a limit since it started, by rule. */
  overAdmittedByRule: Record<string, number>
}

export interface ProcessView {
  instance: string
  /** When it last wrote (ms). */
  atMs: number
  hybrid?: HybridView
}

/** One of the most refused identifiers, as the page may show it. */
export interface TopOffenderView extends RefusedIdentifier {
  /**
   * What a reset of this offender sends instead of its identifier (`{"handle": …}`), when the
   * view allows resets: opaque, and resolved by this view only, for offenders it listed lately.
   */
  handle?: string
  /** When the rule's block on this identifier ends (ms), while one is in force. */
  blockedUntilMs?: number
}

/** What each Server-Sent Event carries, as JSON. */
export interface AdminSnapshot {
  /** When the view read it (ms). */
  atMs: number
  prefix: string
  /** The last minute every process has written, oldest first. */
  seconds: SecondView[]
  /** Rules and windows that refused within that minute, most refusals first. */
  refusals: RefusalsView[]
  /** The most refused identifiers of the last five minutes, heaviest first; masked unless `identifiersShown`. */
  top: TopOffenderView[]
  processes: ProcessView[]
  rules: RulesView
  /** Whether identifiers are shown as they are. */
  identifiersShown: boolean
  /** Whether resets are enabled (the view has a token). */
  resets: boolean
  /** Why the fleet's stats could not be read this time; the other fields are then empty. */
  error?: string
}

/** Reads what the page shows: the fleet's stats through core's readers, and the rules in force. */
export async function readSnapshot(
  config: AdminConfig,
  rules: RulesInForce,
  /** The identifier as the page may show it. */
  shown: (identifier: string) => string,
  /** Where the offenders' handles come from, when resets are allowed. */
  handles: OffenderHandles | undefined,
): Promise<AdminSnapshot> {
  const { client, prefix, topIntervalMs, flushIntervalMs } = config
  const atMs = config.now()
  // A second is complete once every process flushed after it ended.
  const last = Math.floor((atMs - flushIntervalMs) / 1000) - 1
  const base = {
    atMs,
    prefix,
    identifiersShown: config.showIdentifiers,
    resets: config.token !== undefined,
  }
  const rulesView = rules.read()
  try {
    const [seconds, top, processes] = await Promise.all([
      readFleetSeconds(client, prefix, last - HISTORY_SECONDS + 1, last),
      readTopRefused(client, prefix, { sinceMs: TOP_SINCE_MS, nowMs: atMs, topIntervalMs, limit: TOP_LIMIT }),
      readFleetProcesses(client, prefix, { nowMs: atMs, liveMs: 3 * flushIntervalMs }),
    ])
    const listed = top.slice(0, TOP_LIMIT)
    const blockedUntil = await Promise.all(
      listed.map((entry) => rules.blockedUntil(entry.rule, entry.identifier, atMs)),
    )
    return {
      ...base,
      seconds: seconds.map(secondView),
      refusals: refusalsOf(seconds),
      top: listed.map((entry, i) => {
        const until = blockedUntil[i]
        return {
          ...entry,
          identifier: shown(entry.identifier),
          ...(handles ? { handle: handles.handleOf(entry.rule, entry.identifier, atMs) } : {}),
          ...(until === undefined ? {} : { blockedUntilMs: until }),
        }
      }),
      processes: processes.map(processView),
      rules: await rulesView,
    }
  } catch (error) {
    return {
      ...base,
      seconds: [],
      refusals: [],
      top: [],
      processes: [],
      rules: await rulesView,
      error: error instanceof Error ? error.message : String(error),
    }
  }
}

function secondView({ second, rules, storeErrors }: FleetSecond): SecondView {
  const decisions: Partial<Record<DecisionOutcome, number>> = {}
  for (const counts of Object.values(rules)) {
    for (const outcome of DECISION_OUTCOMES) {
      const count = counts.decisions[outcome]
      if (count) decisions[outcome] = (decisions[outcome] ?? 0) + count
    }
  }
  return { second, decisions, storeErrors }
}

function refusalsOf(seconds: readonly FleetSecond[]): RefusalsView[] {
  const byRuleWindow = new Map<string, RefusalsView>()
  const lastSecond = seconds.at(-1)
  for (const second of seconds) {
    for (const [rule, counts] of Object.entries(second.rules)) {
      for (const [window, count] of Object.entries(counts.denials)) {
        const key = `${rule}\t${window}`
        let view = byRuleWindow.get(key)
        if (view === undefined) {
          view = { rule, window, lastSecond: 0, lastMinute: 0 }
          byRuleWindow.set(key, view)
        }
        view.lastMinute += count
        if (second === lastSecond) view.lastSecond += count
      }
    }
  }
  return [...byRuleWindow.values()].sort(
    (a, b) => b.lastMinute - a.lastMinute || a.rule.localeCompare(b.rule) || a.window.localeCompare(b.window),
  )
}

function processView({ instance, atMs, hybrid }: FleetProcess): ProcessView {
  if (hybrid === undefined) return { instance, atMs }
  const number = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : 0)
  const overAdmitted: Record<string, number> = {}
  const byRule = hybrid.overAdmittedByRule
  if (byRule !== null && typeof byRule === 'object') {
    for (const [rule, units] of Object.entries(byRule)) overAdmitted[rule] = number(units)
  }
  return {
    instance,
    atMs,
    hybrid: {
      stalenessMs: number(hybrid.stalenessMs),
      mode: typeof hybrid.mode === 'string' ? hybrid.mode : 'unknown',
      instances: number(hybrid.instances),
      trackedKeys: number(hybrid.trackedKeys),
      overAdmittedByRule: overAdmitted,
    },
  }
}
