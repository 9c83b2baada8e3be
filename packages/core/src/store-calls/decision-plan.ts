import type { Decision, WindowState } from '../rules/decision.js'
import { validateIdentifier } from '../rules/keys.js'
import type { Rule } from '../rules/rules.js'
import { isStateOf } from '../rules/state-name.js'
import type { StoreErrorPolicy } from '../rules/store-error-policy.js'
import { type Identifiers, targetsOf } from '../stores/shared/decision-targets.js'
import { ALLOWED, BLOCKED, SHED } from '../stores/shared/evaluate-locally.js'
import { decisionFrom, type LocalCall, windowStateOf } from '../stores/shared/local-decision.js'
import type { StoreOperation, StoreRequest, StoreResult, StoreTarget } from '../stores/store.js'
import { describeValue, TollgateArgumentError, TollgateConfigError, TollgateError } from '../support/errors.js'
import type { CallSettings } from './decision-options.js'

/** Identifiers or windows beyond these make one decision unreasonably large; they are refused. */
export const MAX_IDENTIFIERS = 8

/** One call's decision, resolved before any I/O. */
export interface DecisionPlan extends LocalCall {
  readonly policy: StoreErrorPolicy
  readonly storeTimeoutMs: number
  /** What a store that is asked with a request gets (requestOf), made when first needed: a decision made in the process needs none. */
  request: StoreRequest | undefined
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
  const dryRun = call.dryRun ?? rule.dryRun ?? limiter.dryRun
  const enforcing = operation === 'consume' || operation === 'peek'
  return {
    rule,
    operation,
    identifiers,
    cost: call.cost,
    // A request carries a random number only when it can shed: without lowBurst, nothing changes.
    random: enforcing && limiter.shedding?.has(rule) ? randomOf(limiter.random) : undefined,
    // A decision in dry run never refuses, so blocks neither refuse it nor count it; a refund gives back, whatever blocks.
    blocks: !dryRun && enforcing,
    dryRun,
    policy: call.onStoreError ?? rule.onStoreError ?? limiter.onStoreError,
    storeTimeoutMs: call.storeTimeoutMs,
    request: undefined,
  }
}

/** The plan's request to a store, made once. Throws when a rule of the chain charges none of the identifiers. */
export function requestOf(plan: DecisionPlan): StoreRequest {
  if (plan.request !== undefined) return plan.request
  const { operation, cost, random } = plan
  const targets = targetsOf(plan.rule.chain, plan.identifiers, { blocks: plan.blocks })
  plan.request = random === undefined ? { operation, targets, cost } : { operation, targets, cost, random }
  return plan.request
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
 * The decision a store's answer makes. Throws TG_STORE for an answer that does not fit the plan,
 * which is then the store's failure.
 */
export function decisionOf(plan: DecisionPlan, result: StoreResult): Decision {
  const { allowed, nowMs } = result
  const { targets } = requestOf(plan)
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
      const answer = result.windows[i]
      if (!answer) throw new TollgateError('TG_STORE', 'the store answered fewer windows than the decision holds')
      const state = windowStateOf(rule, target.identifier, window, answer, allowed, nowMs)
      if (state.failed && answer.fitsAtMs > retryAt) retryAt = answer.fitsAtMs
      windows[i++] = state
    }
  }
  // Windows answered beyond those the decision holds are not the decision's.
  if (i < windows.length) windows.length = i
  const bits = allowed ? ALLOWED : result.blocked === true ? BLOCKED : result.shed === true ? SHED : 0
  return decisionFrom(plan, bits, nowMs, retryAt, windows)
}

/** The decision an in-process store makes while the shared store fails (policy `'local'`). */
export function fallbackDecisionOf(plan: DecisionPlan, result: StoreResult, error: TollgateError): Decision {
  const decision = decisionOf(plan, result)
  if (decision.reason !== 'dry-run') decision.reason = 'local-fallback'
  decision.error = error
  return decision
}
