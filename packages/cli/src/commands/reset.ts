import { targetsOf } from '@tollgate/core'
import type { CommandModule } from '../command.js'
import { ruleNamed } from '../rule-named.js'
import type { Session } from '../session.js'

/** `tollgate reset --json`. */
export interface ResetResult {
  rule: string
  identifiers: string[]
  /** The rules whose state was forgotten: the rule, then its parents with `--parents`. */
  rules: string[]
  /** Every key deleted, and how many of them held state. */
  keys: string[]
  existed: number
}

export const reset: CommandModule = {
  register(program, run) {
    program
      .command('reset')
      .description("forget a rule's state for identifiers (asks first on a terminal)")
      .argument('<rule>', 'rule name')
      .argument('<identifier...>', 'identifiers as the limiter takes them, such as ip:203.0.113.7 or user:42')
      .option('--parents', "also forget its parents' state (which counts its siblings' use too)")
      .option('-y, --yes', 'do not ask for confirmation')
      .action(
        run(async (session: Session, name: string, identifiers: string[]) => {
          const { parents = false, yes = false } = session.commandOptions<{ parents?: boolean; yes?: boolean }>()
          const set = await session.ruleSet()
          const { limiter, store } = set.limiter()
          const rule = ruleNamed(limiter.rules, name)
          const chain = parents ? rule.chain : [rule]
          // What the limiter's reset forgets: each rule's identifiers of its kinds, with an override's windows where one applies.
          const keys = targetsOf(chain, identifiers).map((target) => store.keyOf(target))
          const who = identifiers.join(', ')
          const rules = chain.map((link) => link.name)
          await session.confirm(
            `Forget the state of ${rules.map((r) => `'${r}'`).join(', ')} for ${who} (${keys.length} key${keys.length === 1 ? '' : 's'} under ${JSON.stringify(session.options.prefix)})?`,
            yes,
            'reset',
          )
          const { client } = await session.redis()
          const existed = (await Promise.all(keys.map((key) => client.exists(key)))).reduce((a, b) => a + b, 0)
          await limiter.reset(name, identifiers, { parents })
          session.out.result<ResetResult>({ rule: name, identifiers, rules, keys, existed }, (result) => {
            const held = `${result.existed} of ${result.keys.length} key${result.keys.length === 1 ? '' : 's'} held state`
            return `reset ${result.rules.join(', ')} for ${result.identifiers.join(', ')}: ${held}`
          })
        }),
      )
  },
}
