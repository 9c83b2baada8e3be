import { type Duration, loadRules, parseDuration, type RuleOptions, type RulesVersion } from '@tollgate/core'
import type { CommandModule } from '../../command.js'
import { isoTime, windowText } from '../../format.js'
import type { Session } from '../../session.js'

/** `tollgate rules history --json`: the versions as `LiveRules.history` gives them, newest first. */
export interface HistoryResult {
  epoch: number
  rule: string | null
  versions: RulesVersion[]
}

interface Row {
  version: RulesVersion
  change: RulesVersion['changes'][number]
}

export const history: CommandModule = {
  register(group, run) {
    group
      .command('history')
      .description('the live rules versions published (the last 200), newest first, or those that changed one rule')
      .argument('[rule]', 'only the versions that changed this rule')
      .action(
        run(async (session: Session, rule: string | undefined) => {
          const live = await session.liveRules()
          const versions = await live.history(rule)
          const defaults = session.options.rules === undefined ? undefined : loadRules(session.options.rules)
          // What a rule with no published options is: the application's default, if it has one.
          const unpublished = (name: string) =>
            defaults === undefined ? 'unpublished' : Object.hasOwn(defaults, name) ? 'default' : 'none'
          session.out.result<HistoryResult>({ epoch: live.epoch, rule: rule ?? null, versions }, (result) => {
            if (result.versions.length === 0)
              return `no versions published under ${JSON.stringify(session.options.prefix)}`
            const rows = result.versions.flatMap((version) =>
              version.changes
                .filter((change) => rule === undefined || change.rule === rule)
                .map((change) => ({ version, change })),
            )
            return session.out.table<Row>(
              [
                { header: 'EPOCH', value: (r) => String(r.version.epoch), align: 'right' },
                { header: 'PUBLISHED', value: (r) => isoTime(r.version.publishedAtMs) },
                { header: 'RULE', value: (r) => r.change.rule },
                {
                  header: 'CHANGE',
                  value: (r) =>
                    `${optionsText(r.change.previous, unpublished(r.change.rule))} → ${optionsText(r.change.options, unpublished(r.change.rule))}`,
                },
                {
                  header: 'NOTE',
                  value: (r) => (r.version.rollbackOf === undefined ? '' : `rollback to epoch ${r.version.rollbackOf}`),
                },
              ],
              rows,
            )
          })
        }),
      )
  },
}

/** Options as they were published, compactly: `sliding-log 600/1m, 10/1s parent api`; `unpublished` for none. */
function optionsText(options: RuleOptions | string | null, unpublished: string): string {
  if (options === null) return unpublished
  if (typeof options === 'string') return `(not JSON: ${options.slice(0, 40)})`
  const windows = Array.isArray(options.windows)
    ? options.windows.map((w) => windowOf(w.limit, w.period, w.lowBurst)).join(', ')
    : '?'
  const parts = [options.algorithm ?? 'sliding-log', windows]
  if (options.parent !== undefined) parts.push(`parent ${options.parent}`)
  if (options.dryRun !== undefined) parts.push(`dryRun ${options.dryRun}`)
  if (options.onStoreError !== undefined) parts.push(`onStoreError ${options.onStoreError}`)
  if (Array.isArray(options.by)) parts.push(`by [${options.by.join(', ')}]`)
  if (options.overrides !== undefined && options.overrides !== null && typeof options.overrides === 'object') {
    parts.push(`overrides ${Object.keys(options.overrides).join(', ')}`)
  }
  if (options.block !== undefined && options.block !== null && typeof options.block === 'object') {
    parts.push(`block ${String(options.block.for)}`)
  }
  return parts.join(' ')
}

/** A window as `tollgate rules list` writes it (`1000/1m`, `~50` for one that sheds), whatever period text was published. */
function windowOf(limit: number, period: Duration, lowBurst: number | undefined): string {
  const periodMs = parseDuration(period)
  if (typeof periodMs !== 'number') return `${limit}/${String(period).replace(/\s+/g, '')}`
  return windowText(lowBurst === undefined ? { limit, periodMs } : { limit, periodMs, lowBurst })
}
