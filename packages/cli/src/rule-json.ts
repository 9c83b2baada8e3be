import { type AlgorithmName, formatDuration, type Rule, type StoreErrorPolicy } from '@tollgate/core'

/** A rule in `--json` output: every option resolved, null where the rule leaves it to the limiter. */
export interface RuleJson {
  name: string
  algorithm: AlgorithmName
  windows: Array<{ limit: number; periodMs: number; lowBurst?: number }>
  parent: string | null
  onStoreError: StoreErrorPolicy | null
  dryRun: boolean | null
  /** The identifier kinds it is charged on; null: every identifier given, []: one count for everyone. */
  by: string[] | null
  /** Windows for some identifiers or patterns in place of the rule's, in the order written. */
  overrides: Array<{ key: string; windows: RuleJson['windows']; stateName: string }>
  /** Its lockout after refusals; null when it has none. */
  block: { forMs: number; after: number; factor: number; maxMs: number } | null
  /** The name its state is kept under in Redis keys (docs/live-rules.md). */
  stateName: string
}

export function ruleJson(rule: Rule): RuleJson {
  return {
    name: rule.name,
    algorithm: rule.algorithm,
    windows: windowsJson(rule.windows),
    parent: rule.parent ?? null,
    onStoreError: rule.onStoreError ?? null,
    dryRun: rule.dryRun ?? null,
    by: rule.by === undefined ? null : [...rule.by],
    overrides: (rule.overrides?.list ?? []).map((override) => ({
      key: override.key,
      windows: windowsJson(override.windows),
      stateName: override.stateName,
    })),
    block:
      rule.block === undefined
        ? null
        : { forMs: rule.block.forMs, after: rule.block.after, factor: rule.block.factor, maxMs: rule.block.maxMs },
    stateName: rule.stateName,
  }
}

function windowsJson(windows: Rule['windows']): RuleJson['windows'] {
  return windows.map((window) =>
    window.lowBurst === undefined
      ? { limit: window.limit, periodMs: window.periodMs }
      : { limit: window.limit, periodMs: window.periodMs, lowBurst: window.lowBurst },
  )
}

function configOf(windows: Rule['windows']): Array<Record<string, unknown>> {
  return windows.map((window) => ({
    limit: window.limit,
    period: formatDuration(window.periodMs),
    ...(window.lowBurst === undefined ? {} : { lowBurst: window.lowBurst }),
  }))
}

/** One item of a rules file's `limits`, as `loadRules` reads it back: periods as durations. */
export function rulesFileItem(rule: Rule): Record<string, unknown> {
  return {
    name: rule.name,
    algorithm: rule.algorithm,
    ...(rule.parent === undefined ? {} : { parent: rule.parent }),
    ...(rule.onStoreError === undefined ? {} : { onStoreError: rule.onStoreError }),
    ...(rule.dryRun === undefined ? {} : { dryRun: rule.dryRun }),
    ...(rule.by === undefined ? {} : { by: [...rule.by] }),
    config: configOf(rule.windows),
    ...(rule.overrides === undefined
      ? {}
      : {
          overrides: Object.fromEntries(
            rule.overrides.list.map((override) => [override.key, { config: configOf(override.windows) }]),
          ),
        }),
    ...(rule.block === undefined
      ? {}
      : {
          block: {
            for: formatDuration(rule.block.forMs),
            after: rule.block.after,
            factor: rule.block.factor,
            max: formatDuration(rule.block.maxMs),
          },
        }),
  }
}

/** Whether two rules decide alike: same algorithm, windows, parent and policies (state names aside). */
export function sameRule(a: Rule, b: Rule): boolean {
  const withoutStates = (rule: Rule) => {
    const { stateName: _, overrides, ...rest } = ruleJson(rule)
    return JSON.stringify([rest, overrides.map(({ stateName: _state, ...override }) => override)])
  }
  return withoutStates(a) === withoutStates(b)
}
