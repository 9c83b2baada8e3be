import { parseDuration, type RefusedIdentifier, readTopRefused } from '@tollgate/core'
import type { CommandModule } from '../command.js'
import { usageError } from '../errors.js'
import type { Session } from '../session.js'

/** `tollgate top --json`. */
export interface TopResult {
  sinceMs: number
  refused: RefusedIdentifier[]
}

export const top: CommandModule = {
  register(program, run) {
    program
      .command('top')
      .description('the most refused identifiers of the fleet, from processes sharing their stats (shareFleetStats)')
      .option('--rule <rule>', 'only this rule')
      .option('--since <duration>', 'how far back, such as 5m or 1h', '5m')
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
          const sinceMs = durationOption('--since', since)
          const most = Number(limit)
          if (!Number.isSafeInteger(most) || most < 1)
            throw usageError(`--limit must be a positive integer, got ${limit}`)
          const { client } = await session.redis()
          const refused = await readTopRefused(client, session.options.prefix, {
            sinceMs,
            limit: most,
            ...(rule === undefined ? {} : { rule }),
          })
          session.out.result<TopResult>({ sinceMs, refused }, (result) => {
            if (result.refused.length === 0) {
              return `no refusals recorded in the last ${since} (do the processes call shareFleetStats?)`
            }
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

export function durationOption(flag: string, text: string): number {
  const parsed = parseDuration(text)
  if (typeof parsed === 'string') throw usageError(`${flag}: ${parsed}`)
  return parsed
}
