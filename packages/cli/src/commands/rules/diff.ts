import type { CommandModule } from '../../command.js'
import type { Session } from '../../session.js'
import { changesOf, type RuleChange } from './changes.js'
import { renderChanges } from './render-changes.js'
import { describeSource } from './source.js'

/** `tollgate rules diff --json`: the file's rules against the live rules at `epoch`. */
export interface DiffResult {
  epoch: number
  prefix: string
  file: string
  changes: RuleChange[]
}

export const diff: CommandModule = {
  register(group, run) {
    group
      .command('diff')
      .description('what publishing a rules file would change in the live rules, and which rules would start fresh')
      .argument('<file>', 'YAML or JSON rules file')
      .action(
        run(async (session: Session, file: string) => {
          const live = await session.liveRules()
          const { entries } = changesOf(live, file)
          const { prefix } = session.options
          session.out.result<DiffResult>({ epoch: live.epoch, prefix, file, changes: entries }, (result) => {
            const against = describeSource({
              source: 'live',
              epoch: result.epoch,
              prefix,
              file: session.options.rules ?? null,
            })
            return `${session.out.color.dim(`${file} against ${against}`)}\n${renderChanges(session, result.changes)}`
          })
        }),
      )
  },
}
