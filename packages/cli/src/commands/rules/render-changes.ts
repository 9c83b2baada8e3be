import { windowsText } from '../../format.js'
import type { RuleJson } from '../../rule-json.js'
import type { Session } from '../../session.js'
import { fieldChanges, type RuleChange } from './changes.js'

/** `+ added`, `~ changed` with what changes and whether counts are kept, `= unchanged`; then a count. */
export function renderChanges(session: Session, entries: readonly RuleChange[]): string {
  const { color } = session.out
  const rows = session.out.table<RuleChange>(
    [
      { header: ' ', value: (e) => mark(session, e) },
      { header: 'RULE', value: (e) => e.rule },
      { header: 'CHANGE', value: (e) => e.change },
      { header: 'WHAT', value: (e) => what(e) },
      { header: 'STATE', value: (e) => (e.change === 'unchanged' ? '' : stateText(session, e)) },
    ],
    entries,
  )
  const changing = entries.filter((e) => e.change !== 'unchanged').length
  const summary = `${changing} rule${changing === 1 ? '' : 's'} to publish, ${entries.length - changing} unchanged`
  return `${rows}\n${color.dim(summary)}`
}

function mark(session: Session, entry: RuleChange): string {
  const { color } = session.out
  if (entry.change === 'added') return color.green('+')
  if (entry.change === 'changed') return color.yellow('~')
  return color.dim('=')
}

function what(entry: RuleChange): string {
  if (entry.before === null) return describe(entry.after)
  return fieldChanges(entry.before, entry.after, (rule) => windowsText(rule)).join('; ')
}

function describe(rule: RuleJson): string {
  const parent = rule.parent === null ? '' : `, parent ${rule.parent}`
  return `${rule.algorithm} ${windowsText(rule)}${parent}`
}

function stateText(session: Session, entry: RuleChange): string {
  const { color } = session.out
  if (entry.state === 'kept') return 'counts kept'
  return entry.before === null ? 'new' : color.yellow('starts fresh')
}
