import type { AlgorithmName, RulesOptions } from '@tollgate/core'

/** The rules, each that names no algorithm given `algorithm` (undefined: the rules as they are). */
export function withAlgorithm(rules: RulesOptions, algorithm: AlgorithmName | undefined): RulesOptions {
  if (algorithm === undefined) return rules
  return Object.fromEntries(
    Object.entries(rules).map(([name, rule]) => [
      name,
      typeof rule === 'object' && rule.algorithm === undefined ? { ...rule, algorithm } : rule,
    ]),
  ) as RulesOptions
}
