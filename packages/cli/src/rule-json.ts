import { type AlgorithmName, formatDuration, type Rule, type StoreErrorPolicy } from '@tollgate/core'

/** A rule in `--json` output: every option resolved, null where the rule leaves it to the limiter. */
export interface RuleJson {
  name: string
  algorithm: AlgorithmName
  windows: Array<{ limit: number; periodMs: number; lowBurst?: number }>
  parent: string | null
  onStoreError: StoreErrorPolicy | null
  dryRun: boolean | null
  /** The name its state is kept under in Redis keys (docs/live-rules.md). */
  stateName: string
}

export function ruleJson(rule: Rule): RuleJson {
  return {
    name: rule.name,
    algorithm: rule.algorithm,
    windows: rule.windows.map((window) =>
      window.lowBurst === undefined
        ? { limit: window.limit, periodMs: window.periodMs }
        : { limit: window.limit, periodMs: window.periodMs, lowBurst: window.lowBurst },
    ),
    parent: rule.parent ?? null,
    onStoreError: rule.onStoreError ?? null,
    dryRun: rule.dryRun ?? null,
    stateName: rule.stateName,
  }
}

/** One item of a rules file's `limits`, as `loadRules` reads it back: periods as durations. */
export function rulesFileItem(rule: Rule): Record<string, unknown> {
  return {
    name: rule.name,
    algorithm: rule.algorithm,
    ...(rule.parent === undefined ? {} : { parent: rule.parent }),
    ...(rule.onStoreError === undefined ? {} : { onStoreError: rule.onStoreError }),
    ...(rule.dryRun === undefined ? {} : { dryRun: rule.dryRun }),
    config: rule.windows.map((window) => ({
      limit: window.limit,
      period: formatDuration(window.periodMs),
      ...(window.lowBurst === undefined ? {} : { lowBurst: window.lowBurst }),
    })),
  }
}

/** Whether two rules decide alike: same algorithm, windows, parent and policies (state names aside). */
export function sameRule(a: Rule, b: Rule): boolean {
  const { stateName: _a, ...left } = ruleJson(a)
  const { stateName: _b, ...right } = ruleJson(b)
  return JSON.stringify(left) === JSON.stringify(right)
}
