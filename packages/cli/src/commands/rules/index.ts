import type { CommandModule } from '../../command.js'
import { diff } from './diff.js'
import { get } from './get.js'
import { history } from './history.js'
import { list } from './list.js'
import { publish } from './publish.js'
import { rollback } from './rollback.js'
import { validate } from './validate.js'

const SUBCOMMANDS: readonly CommandModule[] = [list, get, validate, diff, publish, history, rollback]

export const rules: CommandModule = {
  register(program, run) {
    const group = program
      .command('rules')
      .description(
        'list, check, compare, publish and roll back rules (live rules: https://github.com/tollgate-js/tollgate/blob/main/docs/live-rules.md)',
      )
    for (const subcommand of SUBCOMMANDS) subcommand.register(group, run)
  },
}
