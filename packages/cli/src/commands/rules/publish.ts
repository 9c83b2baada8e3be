import { TollgateError } from '@tollgate/core'
import { InvalidArgumentError } from 'commander'
import type { CommandModule } from '../../command.js'
import type { Session } from '../../session.js'
import { changesOf, type RuleChange } from './changes.js'
import { renderChanges } from './render-changes.js'

/** `tollgate rules publish --json`. */
export interface PublishResult {
  /** False when the file changes nothing: no epoch is made for it. */
  published: boolean
  /** The epoch in force after the command. */
  epoch: number
  previousEpoch: number
  changes: RuleChange[]
}

export const publish: CommandModule = {
  register(group, run) {
    group
      .command('publish')
      .description("publish a rules file's changed rules to every process (asks first on a terminal)")
      .argument('<file>', 'YAML or JSON rules file')
      .option(
        '--expected-epoch <epoch>',
        'publish only if the live rules are still at this epoch (default: the epoch the changes were shown against)',
        epochOf,
      )
      .option('-y, --yes', 'do not ask for confirmation')
      .action(
        run(async (session: Session, file: string) => {
          const { expectedEpoch, yes = false } = session.commandOptions<{ expectedEpoch: number; yes: boolean }>()
          const live = await session.liveRules()
          const before = live.epoch
          if (expectedEpoch !== undefined && expectedEpoch !== before) throw conflict(expectedEpoch, before)
          const { entries, changed } = changesOf(live, file)
          const count = Object.keys(changed).length
          session.out.print(renderChanges(session, entries))
          if (count === 0) {
            session.out.result<PublishResult>(
              { published: false, epoch: before, previousEpoch: before, changes: entries },
              outcome,
            )
            return
          }
          await session.confirm(
            `Publish ${count} rule${count === 1 ? '' : 's'} to the live rules under ${JSON.stringify(session.options.prefix)} (epoch ${before} → ${before + 1})?`,
            yes,
            'rules publish',
          )
          // Against the epoch the changes were computed on: a publish in between is a conflict, not overwritten.
          const { epoch } = await live.publish(changed, { expectedEpoch: before })
          session.out.result<PublishResult>(
            { published: true, epoch, previousEpoch: before, changes: entries },
            outcome,
          )
        }),
      )
  },
}

function outcome(result: PublishResult): string {
  return result.published
    ? `published: epoch ${result.previousEpoch} → ${result.epoch}`
    : `nothing to publish: the live rules at epoch ${result.epoch} already hold these`
}

export function epochOf(value: string): number {
  const epoch = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(epoch)) {
    throw new InvalidArgumentError(`an epoch is an integer ≥ 0, got ${JSON.stringify(value)}`)
  }
  return epoch
}

function conflict(expected: number, found: number): TollgateError {
  return new TollgateError(
    'TG_CONFLICT',
    `the live rules are at epoch ${found}, not ${expected}: another publish came first; nothing was written`,
  )
}
