import { setTimeout as sleep } from 'node:timers/promises'
import { type FleetSecond, readFleetSeconds } from '@tollgate/core'
import type { CommandModule } from '../command.js'
import { usageError } from '../errors.js'
import type { Session } from '../session.js'

/**
 * Seconds behind the clock a frame shows: the processes write each second's counts at their next
 * flush (every second), so the last second or two are not complete yet.
 */
const LAG_S = 2
const REFUSED = ['limited', 'shed', 'store_error_denied'] as const

/** One rule's line of a frame; `tollgate watch --json` prints a frame a line. */
export interface WatchRow {
  rule: string
  decisions: number
  allowed: number
  refused: number
  /** Refusals by window (`60s`). */
  denials: Record<string, number>
}

export interface WatchFrame {
  /** Epoch seconds. */
  second: number
  rows: WatchRow[]
  storeErrors: number
}

export const watch: CommandModule = {
  register(program, run) {
    program
      .command('watch')
      .description(
        `the fleet's decisions per second by rule and refusals by window, redrawn each second (${LAG_S} s behind, from processes sharing their stats)`,
      )
      .option('--rule <rule>', 'only this rule')
      .option('--count <n>', 'stop after this many frames (default: until Ctrl-C)')
      .option('--at <time>', 'show one past second: epoch seconds or an ISO date')
      .action(
        run(async (session: Session) => {
          const { rule, count, at } = session.commandOptions<{ rule?: string; count?: string; at?: string }>()
          const frames = at !== undefined ? 1 : count === undefined ? Number.POSITIVE_INFINITY : Number(count)
          if (!(frames >= 1) || (count !== undefined && !Number.isSafeInteger(frames))) {
            throw usageError(`--count must be a positive integer, got ${count}`)
          }
          const fixed = at === undefined ? undefined : secondOf(at)
          const { client } = await session.redis()
          const { stdout } = session.io
          const redraw = stdout.isTTY === true && !session.out.json && fixed === undefined
          for (let frame = 0; frame < frames; frame++) {
            if (frame > 0) await sleep(1000 - (Date.now() % 1000))
            const second = fixed ?? Math.floor(Date.now() / 1000) - LAG_S
            const [counts] = await readFleetSeconds(client, session.options.prefix, second, second)
            const shown = frameOf(counts as FleetSecond, rule)
            if (session.out.json) {
              stdout.write(`${JSON.stringify(shown)}\n`)
              continue
            }
            const text = render(session, shown)
            // On a terminal the frame replaces the last one; elsewhere frames follow each other.
            stdout.write(redraw ? `\x1b[H\x1b[2J${text}\n` : `${text}\n`)
          }
        }),
      )
  },
}

function secondOf(text: string): number {
  const asNumber = Number(text)
  const ms = Number.isFinite(asNumber) && /^\d+$/.test(text) ? asNumber * 1000 : Date.parse(text)
  if (!Number.isFinite(ms)) throw usageError(`--at must be epoch seconds or an ISO date, got ${JSON.stringify(text)}`)
  return Math.floor(ms / 1000)
}

export function frameOf(counts: FleetSecond, only: string | undefined): WatchFrame {
  const rows: WatchRow[] = []
  for (const [rule, { decisions, denials }] of Object.entries(counts.rules)) {
    if (only !== undefined && rule !== only) continue
    const total = Object.values(decisions).reduce((sum, n) => sum + (n ?? 0), 0)
    const refused = REFUSED.reduce((sum, outcome) => sum + (decisions[outcome] ?? 0), 0)
    rows.push({ rule, decisions: total, allowed: decisions.allowed ?? 0, refused, denials })
  }
  rows.sort((a, b) => b.decisions - a.decisions || a.rule.localeCompare(b.rule))
  return { second: counts.second, rows, storeErrors: counts.storeErrors }
}

function render(session: Session, frame: WatchFrame): string {
  const when = new Date(frame.second * 1000).toISOString().replace('.000Z', 'Z')
  const head = `${when}  decisions/s by rule${frame.storeErrors > 0 ? `, store errors ${frame.storeErrors}` : ''}`
  if (frame.rows.length === 0) return `${head}\n(no decisions recorded in this second)`
  const table = session.out.table(
    [
      { header: 'rule', value: (row: WatchRow) => row.rule },
      { header: 'decisions/s', value: (row) => String(row.decisions), align: 'right' },
      { header: 'allowed', value: (row) => String(row.allowed), align: 'right' },
      { header: 'refused', value: (row) => String(row.refused), align: 'right' },
      {
        header: 'refusals by window',
        value: (row) =>
          Object.entries(row.denials)
            .map(([window, n]) => `${window} ${n}`)
            .join('  '),
      },
    ],
    frame.rows,
  )
  return `${head}\n${table}`
}
