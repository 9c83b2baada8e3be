import { createLimiter, loadRules, type Rule } from '@tollgate/core'
import type { CommandModule } from '../../command.js'
import { codeOf, messageOf } from '../../errors.js'
import { windowsText } from '../../format.js'
import { type RuleJson, ruleJson } from '../../rule-json.js'
import type { Session } from '../../session.js'

/** `tollgate rules validate --json`: `rules` when valid, `error` when not. */
export type ValidateResult =
  | { file: string; valid: true; rules: RuleJson[]; warnings: Array<{ code: string; message: string }> }
  | { file: string; valid: false; error: { code: string | null; message: string } }

export const validate: CommandModule = {
  register(group, run) {
    group
      .command('validate')
      .description('check a rules file as createLimiter checks rules (no Redis needed); exit 1 when invalid')
      .argument('<file>', 'YAML or JSON rules file')
      .action(
        run(async (session: Session, file: string) => {
          const result = validated(file)
          if (!result.valid) {
            session.exitCode = 1
            session.out.problem(result.error.message, result.error.code ?? undefined)
          }
          session.out.result<ValidateResult>(result, (r) => render(session, r))
        }),
      )
  },
}

/** What `createLimiter` makes of the file's rules: its checks, its warnings, nothing sent anywhere. */
function validated(file: string): ValidateResult {
  const warnings: Array<{ code: string; message: string }> = []
  let rules: Rule[]
  try {
    const limiter = createLimiter({
      rules: loadRules(file),
      onWarning: (message, code) => warnings.push({ code, message }),
    })
    rules = [...limiter.rules.values()]
    void limiter.close()
  } catch (error) {
    return { file, valid: false, error: { code: codeOf(error) ?? null, message: messageOf(error) } }
  }
  return { file, valid: true, rules: rules.map(ruleJson), warnings }
}

function render(session: Session, result: ValidateResult): string {
  const { color } = session.out
  if (!result.valid) return `${result.file}: ${color.red('invalid')}`
  const lines = [
    `${result.file}: ${color.green('valid')}, ${result.rules.length} rule${result.rules.length === 1 ? '' : 's'}`,
  ]
  lines.push(
    session.out.table<RuleJson>(
      [
        { header: 'RULE', value: (r) => r.name },
        { header: 'ALGORITHM', value: (r) => r.algorithm },
        { header: 'WINDOWS', value: (r) => windowsText(r) },
        { header: 'PARENT', value: (r) => r.parent ?? '-' },
      ],
      result.rules,
    ),
  )
  for (const warning of result.warnings) lines.push(`${color.yellow(`warning ${warning.code}:`)} ${warning.message}`)
  return lines.join('\n')
}
