import type { Rule, RulesVersion } from '@tollgate/core'
import type { CommandModule } from '../../command.js'
import { blockText, windowsText } from '../../format.js'
import { type RuleJson, ruleJson } from '../../rule-json.js'
import type { Session } from '../../session.js'
import { describeSource } from './source.js'

/** `tollgate rules list --json`. */
export interface ListResult {
  source: 'live' | 'file'
  epoch: number
  prefix: string
  /** The `--rules` file, if given: the rules when none are live, the defaults under live ones. */
  file: string | null
  rules: Array<RuleJson & { publishedAt: number | null }>
}

export const list: CommandModule = {
  register(group, run) {
    group
      .command('list')
      .description('the rules in force, with the live rules epoch')
      .action(
        run(async (session: Session) => {
          const set = await session.ruleSet()
          const versions = set.source === 'live' ? await set.live.history() : []
          const rules = [...set.rules.values()].sort((a, b) => a.name.localeCompare(b.name))
          session.out.result<ListResult>(
            {
              source: set.source,
              epoch: set.epoch,
              prefix: session.options.prefix,
              file: set.file ?? null,
              rules: rules.map((rule) => ({ ...ruleJson(rule), publishedAt: publishedAt(rule, versions) })),
            },
            (result) => render(session, result),
          )
        }),
      )
  },
}

/**
 * The epoch that published the override in force, from the history (the last 200 publishes):
 * null for a rule on its default, or published before those.
 */
function publishedAt(rule: Rule, versions: readonly RulesVersion[]): number | null {
  for (const version of versions) {
    const change = version.changes.find((c) => c.rule === rule.name)
    if (change) return change.options === null ? null : version.epoch
  }
  return null
}

function render(session: Session, result: ListResult): string {
  const { color } = session.out
  const rows = session.out.table<ListResult['rules'][number]>(
    [
      { header: 'RULE', value: (r) => r.name },
      { header: 'ALGORITHM', value: (r) => r.algorithm },
      { header: 'WINDOWS', value: (r) => windowsText(r) },
      { header: 'PARENT', value: (r) => r.parent ?? '-' },
      { header: 'SOURCE', value: (r) => (r.publishedAt === null ? sourceOf(result) : `epoch ${r.publishedAt}`) },
      { header: 'NOTES', value: (r) => color.dim(notes(r)) },
    ],
    result.rules,
  )
  return `${color.dim(describeSource(result))}\n${rows}`
}

/** A rule no publish in the history set: the file's, a default under live rules, or published long ago. */
function sourceOf(result: ListResult): string {
  if (result.source === 'file') return 'file'
  return result.file === null ? 'published' : 'default'
}

function notes(rule: RuleJson): string {
  const notes: string[] = []
  if (rule.by !== null) notes.push(rule.by.length === 0 ? 'one count for everyone' : `by ${rule.by.join(', ')}`)
  for (const override of rule.overrides) notes.push(`${override.key}: ${windowsText(override)}`)
  if (rule.block !== null) notes.push(`block: ${blockText(rule.block)}`)
  if (rule.dryRun === true) notes.push('dry run')
  if (rule.onStoreError !== null) notes.push(`on store error: ${rule.onStoreError}`)
  return notes.join('; ')
}
