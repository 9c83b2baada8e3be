import type { Rule } from '@tollgate/core'
import { Document, isMap, isSeq, visit } from 'yaml'
import type { CommandModule } from '../../command.js'
import { type RuleJson, ruleJson, rulesFileItem } from '../../rule-json.js'
import { ruleNamed } from '../../rule-named.js'
import type { Session } from '../../session.js'

/** `tollgate rules get --json`. */
export interface GetResult {
  source: 'live' | 'file'
  epoch: number
  rule: RuleJson
}

export const get: CommandModule = {
  register(group, run) {
    group
      .command('get')
      .description('one rule in force: as a rules file (YAML) that `rules publish` takes back, or as JSON')
      .argument('<rule>', 'rule name')
      .action(
        run(async (session: Session, name: string) => {
          const set = await session.ruleSet()
          const rule = ruleNamed(set.rules, name)
          session.out.result<GetResult>({ source: set.source, epoch: set.epoch, rule: ruleJson(rule) }, () =>
            rulesFileText(rule),
          )
        }),
      )
  },
}

/** The rule as a rules file holds it, each window on one line as the file format's own example writes it. */
function rulesFileText(rule: Rule): string {
  const document = new Document({ limits: [rulesFileItem(rule)] })
  visit(document, {
    Pair(_, pair) {
      if (isSeq(pair.value) && (pair.key as { value?: unknown }).value === 'config') {
        for (const window of pair.value.items) if (isMap(window)) window.flow = true
      }
    },
  })
  return document.toString()
}
