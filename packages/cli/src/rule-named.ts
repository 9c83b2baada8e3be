import { type Rule, TollgateError } from '@tollgate/core'

/** The rule, or the error a limiter gives for a name it does not hold, with the names it does. */
export function ruleNamed(rules: ReadonlyMap<string, Rule>, name: string): Rule {
  const rule = rules.get(name)
  if (rule !== undefined) return rule
  const known = [...rules.keys()].sort().slice(0, 20)
  const more = rules.size > known.length ? ', …' : ''
  throw new TollgateError(
    'TG_UNKNOWN_RULE',
    `no rule ${JSON.stringify(name)}; the rules are ${known.map((r) => `'${r}'`).join(', ')}${more}`,
  )
}
