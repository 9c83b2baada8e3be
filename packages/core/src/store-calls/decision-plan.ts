import { chargesIdentifier, EVERYONE } from '../rules/charged-by.js'
import type { Decision, WindowState } from '../rules/decision.js'
import { validateIdentifier } from '../rules/keys.js'
import type { Rule } from '../rules/rules.js'
import { isStateOf } from '../rules/state-name.js'
import type { StoreErrorPolicy } from '../rules/store-error-policy.js'
import type { StoreOperation, StoreRequest, StoreResult, StoreTarget } from '../stores/store.js'
import { describeValue, TollgateArgumentError, TollgateConfigError, TollgateError } from '../support/errors.js'
import type { CallSettings } from './decision-options.js'

/** Identifiers or windows beyond these make one decision unreasonably large; they are refused. */
export const MAX_IDENTIFIERS = 8

/** One call's decision, resolved before any I/O. */
export interface DecisionPlan {
  readonly rule: Rule
  readonly request: StoreRequest
  readonly cost: number
  /** Whether a refusal is answered as allowed, reason `dry-run`: the call's, else the rule's, else the limiter's. */
  readonly dryRun: boolean
  readonly policy: StoreErrorPolicy
  readonly storeTimeoutMs: number
}

/** The limiter's own settings a plan falls back on. */
export interface PlanDefaults {
  readonly onStoreError: StoreErrorPolicy
  readonly dryRun: boolean
  /** The limiter's `random`. */
  readonly random: () => number
  /** The rules whose decisions may shed (a window of theirs or of a parent has `lowBurst`); undefined when none. */
  readonly shedding: ReadonlySet<Rule> | undefined
}

export function planOf(
  operation: StoreOperation,
  rule: Rule,
  identifiers: Identifiers,
  call: CallSettings,
  limiter: PlanDefaults,
): DecisionPlan {
  const { cost } = call
  const dryRun = call.dryRun ?? rule.dryRun ?? limiter.dryRun
  // A decision in dry run never refuses, so blocks neither refuse it nor count it; a refund gives back, whatever blocks.
  const targets = targetsOf(rule.chain, identifiers, {
    blocks: !dryRun && (operation === 'consume' || operation === 'peek'),
  })
  // A request carries a random number only when it can shed: without lowBurst, nothing changes.
  const request: StoreRequest =
    limiter.shedding?.has(rule) && (operation === 'consume' || operation === 'peek')
      ? { operation, targets, cost, random: randomOf(limiter.random) }
      : { operation, targets, cost }
  return {
    rule,
    request,
    cost,
    dryRun,
    policy: call.onStoreError ?? rule.onStoreError ?? limiter.onStoreError,
    storeTimeoutMs: call.storeTimeoutMs,
  }
}

function randomOf(random: () => number): number {
  const value = random()
  if (typeof value !== 'number' || !(value >= 0 && value < 1)) {
    throw new TollgateConfigError(
      `createLimiter option random returned ${describeValue(value)}; it must return a number from 0 up to but not including 1, as Math.random does`,
    )
  }
  return value
}

export function ruleOf(rules: ReadonlyMap<string, Rule>, name: string): Rule {
  const rule = rules.get(name)
  if (!rule) {
    throw new TollgateError(
      'TG_UNKNOWN_RULE',
      `unknown rule ${describeValue(name)}; the limiter holds ${[...rules.keys()].map((n) => `'${n}'`).join(', ')}`,
    )
  }
  return rule
}

/** A call's identifiers: one as given, without an array made around it, or several. */
export type Identifiers = string | readonly string[]

export function identifiersOf(identifiers: unknown): Identifiers {
  if (typeof identifiers === 'string') return validateIdentifier(identifiers)
  const list = identifiers
  if (!Array.isArray(list) || list.length === 0) {
    throw new TollgateArgumentError(
      `identifiers must be a non-empty string or array of strings, got ${describeValue(identifiers)}`,
    )
  }
  if (list.length > MAX_IDENTIFIERS) {
    throw new TollgateArgumentError(`a decision takes at most ${MAX_IDENTIFIERS} identifiers, got ${list.length}`)
  }
  for (let i = 0; i < list.length; i++) {
    const identifier = validateIdentifier(list[i])
    // At most eight: a loop over those before, not a call to indexOf for each.
    for (let j = 0; j < i; j++) {
      if (list[j] === identifier) {
        throw new TollgateArgumentError(
          `identifier ${describeValue(identifier)} is given twice; it would be charged twice`,
        )
      }
    }
  }
  return list as readonly string[]
}

/**
 * One target per rule and identifier it charges (a rule's `by`: those of its kinds, or one shared
 * by everyone), in rule order, then identifier order. A target names the state of the rule's
 * windows, or of an override's for that identifier (`stateName`: its name and its shape's digest).
 */
export function targetsOf(
  rules: readonly Rule[],
  identifiers: Identifiers,
  /** `blocks`: targets carry their rule's block (StoreTarget.block), for a decision that enforces it. */
  { blocks = false }: { blocks?: boolean } = {},
): StoreTarget[] {
  const one = typeof identifiers === 'string'
  const count = one ? 1 : identifiers.length
  // Sized up front (a rule charged on some kinds leaves it shorter): the first push into an
  // empty array reserves room for 17.
  const targets: StoreTarget[] = new Array(rules.length * count)
  let t = 0
  for (const link of rules) {
    const { by } = link
    if (by !== undefined && by.length === 0) {
      targets[t++] = targetOf(link, EVERYONE, blocks)
      continue
    }
    const first = t
    for (let i = 0; i < count; i++) {
      const identifier = one ? identifiers : (identifiers[i] as string)
      if (by === undefined || chargesIdentifier(by, identifier)) targets[t++] = targetOf(link, identifier, blocks)
    }
    if (t === first) throw unchargeable(link, identifiers)
  }
  targets.length = t
  return targets
}

function targetOf(link: Rule, identifier: string, blocks: boolean): StoreTarget {
  const override = link.overrides?.of(identifier)
  const rule = override === undefined ? link.stateName : override.stateName
  const windows = override === undefined ? link.windows : override.windows
  // Made whole at once: an object spread into another costs a decision more than the rest of it.
  return blocks && link.block !== undefined
    ? { rule, algorithm: link.algorithm, windows, identifier, block: link.block }
    : { rule, algorithm: link.algorithm, windows, identifier }
}

function unchargeable(link: Rule, identifiers: Identifiers): TollgateArgumentError {
  const given = typeof identifiers === 'string' ? [identifiers] : identifiers
  const kinds = (link.by as readonly string[]).map((kind) => `'${kind}'`).join(' or ')
  return new TollgateArgumentError(
    `rule '${link.name}' is charged on identifiers of kind ${kinds}, and the decision gives none: ${given.map((id) => describeValue(id)).join(', ')}`,
  )
}

/**
 * The decision a store's answer makes. Throws TG_STORE for an answer that does not fit the plan,
 * which is then the store's failure.
 */
export function decisionOf(plan: DecisionPlan, result: StoreResult): Decision {
  const { allowed, nowMs } = result
  const { targets } = plan.request
  const windows: WindowState[] = new Array(result.windows.length)
  const { chain } = plan.rule
  // Targets come rule by rule, each rule's together (targetsOf); a target holds the state name of
  // its rule or of an override of it, a decision reports the rule's name.
  let link = 0
  let rule = (chain[0] as Rule).name
  let retryAt = nowMs
  let i = 0
  for (let t = 0; t < targets.length; t++) {
    const target = targets[t] as StoreTarget
    while (!isStateOf(target.rule, rule)) {
      const next = chain[++link]
      if (next === undefined)
        throw new TollgateError('TG_STORE', 'a target of the decision belongs to none of its rules')
      rule = next.name
    }
    for (const window of target.windows) {
      const answer = result.windows[i++]
      if (!answer) throw new TollgateError('TG_STORE', 'the store answered fewer windows than the decision holds')
      const failed = !allowed && answer.fitsAtMs > nowMs
      if (failed) retryAt = Math.max(retryAt, answer.fitsAtMs)
      windows[i - 1] = {
        rule,
        identifier: target.identifier,
        limit: window.limit,
        periodMs: window.periodMs,
        remaining: answer.remaining,
        resetAtMs: answer.resetAtMs,
        failed,
      }
    }
  }
  // Windows answered beyond those the decision holds are not the decision's.
  if (i < windows.length) windows.length = i
  const decision: Decision = {
    allowed,
    reason: allowed ? 'ok' : result.blocked === true ? 'blocked' : result.shed === true ? 'shed' : 'limited',
    rule: plan.rule.name,
    cost: plan.cost,
    retryAfterMs: retryAt - nowMs,
    nowMs,
    windows,
  }
  if (plan.dryRun && !allowed) {
    // Allowed, so nothing to wait for: a client told to retry later would hold back for nothing.
    decision.allowed = true
    decision.reason = 'dry-run'
    decision.retryAfterMs = 0
  }
  return decision
}

/** The decision an in-process store makes while the shared store fails (policy `'local'`). */
export function fallbackDecisionOf(plan: DecisionPlan, result: StoreResult, error: TollgateError): Decision {
  const decision = decisionOf(plan, result)
  if (decision.reason !== 'dry-run') decision.reason = 'local-fallback'
  decision.error = error
  return decision
}
