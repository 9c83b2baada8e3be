import {
  type FleetSecond,
  formatDuration,
  type RefusedIdentifier,
  readFleetProcesses,
  readFleetSeconds,
  readTopRefused,
} from '@tollgate/core'
import type { CommandModule } from '../command.js'
import { durationOption } from '../duration-option.js'
import { usageError } from '../errors.js'
import type { Session } from '../session.js'

/** `tollgate top --json`. */
export interface TopResult {
  sinceMs: number
  refused: RefusedIdentifier[]
}

/**
 * How often processes write who they refused: `shareFleetStats`'s default `topIntervalMs`. A
 * process writes its first list this long after it starts, so a fleet that refuses from its first
 * second has counts and no list until then.
 */
const TOP_INTERVAL_MS = 10_000
/** The per-second counts reach Redis at each process's next flush, about a second later. */
const FLUSH_LAG_MS = 2_000
/** What `shareFleetStats` keeps by default (`retentionMs`): no count is older. */
const RETENTION_MS = 15 * 60_000
/** The outcomes a process lists the identifiers of. */
const LISTED = ['limited', 'shed', 'dry_run'] as const

export const top: CommandModule = {
  register(program, run) {
    program
      .command('top')
      .description('the most refused identifiers of the fleet, from processes sharing their stats (shareFleetStats)')
      .option('--rule <rule>', 'only this rule')
      .option('--since <duration>', 'how far back: 5m, 1h, or milliseconds', '5m')
      .option('--limit <n>', 'identifiers per rule', '20')
      .action(
        run(async (session: Session) => {
          const {
            rule,
            since = '5m',
            limit = '20',
          } = session.commandOptions<{
            rule?: string
            since?: string
            limit?: string
          }>()
          const sinceMs = durationOption('--since', since, (text) => session.out.note(text))
          const most = Number(limit)
          if (!Number.isSafeInteger(most) || most < 1)
            throw usageError(`--limit must be a positive integer, got ${limit}`)
          const { client } = await session.redis()
          const { prefix } = session.options
          const refused = await readTopRefused(client, prefix, {
            sinceMs,
            limit: most,
            ...(rule === undefined ? {} : { rule }),
          })
          // Why the list is empty, told apart only when it is.
          const why = refused.length === 0 ? await whyNoneListed(session, sinceMs, rule) : ''
          session.out.result<TopResult>({ sinceMs, refused }, (result) => {
            if (result.refused.length === 0) return why
            return session.out.table(
              [
                { header: 'rule', value: (row: RefusedIdentifier) => row.rule },
                { header: 'identifier', value: (row) => row.identifier },
                { header: 'refusals', value: (row) => String(row.refusals), align: 'right' },
              ],
              result.refused,
            )
          })
        }),
      )
  },
}

/**
 * Reads the fleet's per-second counts, which processes write every second they decide, to say
 * why no identifier is listed: lists not written yet (refusals counted, the first list due at the
 * end of its interval), no refusal at all (decisions counted), or nothing from any process, the
 * only case that asks whether the processes share their stats: every interval has passed without
 * a word from them.
 */
async function whyNoneListed(session: Session, sinceMs: number, rule: string | undefined): Promise<string> {
  const { client } = await session.redis()
  const { prefix } = session.options
  const now = Date.now()
  const lookBackMs = Math.min(Math.max(sinceMs, TOP_INTERVAL_MS + FLUSH_LAG_MS), RETENTION_MS)
  const [seconds, processes] = await Promise.all([
    readFleetSeconds(client, prefix, Math.floor((now - lookBackMs) / 1000), Math.floor(now / 1000)),
    readFleetProcesses(client, prefix, { nowMs: now }),
  ])
  const { decisions, refusals } = totals(seconds, rule)
  const span = formatDuration(sinceMs)
  const looked = formatDuration(Math.ceil(lookBackMs / 1000) * 1000)
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`
  if (refusals > 0) {
    return `waiting for the first report of refused identifiers: the fleet counted ${plural(refusals, 'refusal')} in the last ${looked}, and each process reports who it refused every ${formatDuration(TOP_INTERVAL_MS)} (shareFleetStats topIntervalMs); run it again in ${formatDuration(TOP_INTERVAL_MS)}`
  }
  if (decisions > 0 || processes.length > 0) {
    const made = decisions > 0 ? `${plural(decisions, 'decision')} in the last ${looked}, none refused` : 'no decision'
    return `no refusals recorded in the last ${span}: the processes sharing their stats made ${made}`
  }
  return `no refusals recorded in the last ${span}, and no process reported anything under prefix ${JSON.stringify(prefix)} in the last ${looked}: do the processes call shareFleetStats(limiter, { client, prefix: ${JSON.stringify(prefix)} })?`
}

function totals(seconds: readonly FleetSecond[], only: string | undefined): { decisions: number; refusals: number } {
  let decisions = 0
  let refusals = 0
  for (const second of seconds) {
    for (const [name, counts] of Object.entries(second.rules)) {
      if (only !== undefined && name !== only) continue
      for (const count of Object.values(counts.decisions)) decisions += count ?? 0
      for (const outcome of LISTED) refusals += counts.decisions[outcome] ?? 0
    }
  }
  return { decisions, refusals }
}
