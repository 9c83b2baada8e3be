import { TollgateArgumentError } from '@tollgate/core'
import type { CommandModule } from '../../command.js'
import type { Session } from '../../session.js'
import { epochOf } from './publish.js'

/** `tollgate rules rollback --json`. */
export interface RollbackResult {
  /** False when the rules were at that epoch already. */
  rolledBack: boolean
  /** The epoch in force after the command: a new one, which holds the rules of `rollbackOf`. */
  epoch: number
  previousEpoch: number
  rollbackOf: number
}

export const rollback: CommandModule = {
  register(group, run) {
    group
      .command('rollback')
      .description("publish an earlier epoch's rule set again, as a new epoch (asks first on a terminal)")
      .argument('<epoch>', 'the epoch whose rules to publish again (0: the defaults)', epochOf)
      .option('-y, --yes', 'do not ask for confirmation')
      .action(
        run(async (session: Session, target: number) => {
          const { yes = false } = session.commandOptions<{ yes: boolean }>()
          const live = await session.liveRules()
          const before = live.epoch
          const render = (result: RollbackResult) =>
            result.rolledBack
              ? `rolled back: epoch ${result.epoch} holds the rules of epoch ${result.rollbackOf} (was epoch ${result.previousEpoch})`
              : `the live rules are at epoch ${result.epoch} already: nothing to roll back`
          if (target > before) {
            throw new TollgateArgumentError(`cannot roll back to epoch ${target}: the rules are at epoch ${before}`)
          }
          if (target === before) {
            session.out.result<RollbackResult>(
              { rolledBack: false, epoch: before, previousEpoch: before, rollbackOf: target },
              render,
            )
            return
          }
          await session.confirm(
            `Roll the live rules under ${JSON.stringify(session.options.prefix)} back to those of epoch ${target} (now at epoch ${before}), as epoch ${before + 1}?`,
            yes,
            'rules rollback',
          )
          const { epoch } = await live.rollback(target)
          session.out.result<RollbackResult>(
            { rolledBack: epoch !== before, epoch, previousEpoch: before, rollbackOf: target },
            render,
          )
        }),
      )
  },
}
