import { type StoreErrorPolicy, storeErrorPolicyOf } from '../rules/store-error-policy.js'
import { describeValue, TollgateArgumentError } from '../support/errors.js'
import { checkOptionsObject, optionKeys } from '../support/option-objects.js'
import { storeTimeoutOf } from './store-wait.js'

export interface DecisionOptions {
  /**
   * Units this request counts for: 1 per request, or bytes, tokens… An integer ≥ 0; 0 checks
   * without charging.
   * @default 1
   */
  cost?: number
  /**
   * Never refuse: a decision that would be refused is allowed with reason `dry-run` and
   * `retryAfterMs` 0, its windows still marking which one refused. Nothing is charged for it.
   * `false` enforces the rule even when the rule or the limiter is in dry run.
   * @default the rule's dryRun, else the limiter's (false)
   * @example limiter.consume('api', ip, { dryRun: true })
   */
  dryRun?: boolean
  /** This call's store failure policy. @default the rule's, else the limiter's `onStoreError` */
  onStoreError?: StoreErrorPolicy
  /** This call's bound on the store's answer, in ms. @default the limiter's `storeTimeoutMs` */
  storeTimeoutMs?: number
}

export interface ResetOptions {
  /**
   * Also forget the state of the rule's parents, and theirs, for these identifiers. A parent
   * counts what every one of its children spent, so forgetting it hands back units spent
   * through the rule's siblings too.
   * @default false
   * @example limiter.reset('api.login', 'user:1', { parents: true })
   */
  parents?: boolean
}

/** One call's options, checked; undefined where the rule's or the limiter's setting applies. */
export interface CallSettings {
  readonly cost: number
  readonly dryRun: boolean | undefined
  readonly onStoreError: StoreErrorPolicy | undefined
  readonly storeTimeoutMs: number
}

const DECISION_OPTION_KEYS = optionKeys<DecisionOptions>({
  cost: true,
  dryRun: true,
  onStoreError: true,
  storeTimeoutMs: true,
})
const RESET_OPTION_KEYS = optionKeys<ResetOptions>({ parents: true })

/**
 * Options objects that cannot change, already checked, per limiter defaults: an HTTP engine passes
 * the same frozen object with every request, and checking it again would cost a tenth of an
 * in-process decision.
 */
const checkedOptions = new WeakMap<object, { defaults: CallSettings; settings: CallSettings }>()

/** `defaults` are what a call without options gets: the limiter's, one object per limiter. */
export function callSettingsOf(options: unknown, defaults: CallSettings): CallSettings {
  if (options === undefined) return defaults
  if (typeof options === 'object' && options !== null && Object.isFrozen(options)) {
    const checked = checkedOptions.get(options)
    if (checked?.defaults === defaults) return checked.settings
    const settings = checkDecisionOptions(options, defaults)
    checkedOptions.set(options, { defaults, settings })
    return settings
  }
  return checkDecisionOptions(options, defaults)
}

function checkDecisionOptions(raw: unknown, defaults: CallSettings): CallSettings {
  const {
    cost = 1,
    dryRun,
    onStoreError,
    storeTimeoutMs,
  } = checkOptionsObject(raw, DECISION_OPTION_KEYS, 'decision options', {
    shape: '{ cost }',
    Failure: TollgateArgumentError,
  })
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new TollgateArgumentError(`cost must be a non-negative integer, got ${describeValue(cost)}`)
  }
  if (dryRun !== undefined && typeof dryRun !== 'boolean') {
    throw new TollgateArgumentError(`dryRun must be a boolean, got ${describeValue(dryRun)}`)
  }
  return {
    cost,
    dryRun,
    onStoreError:
      onStoreError === undefined
        ? undefined
        : storeErrorPolicyOf(onStoreError, TollgateArgumentError, 'decision option onStoreError'),
    storeTimeoutMs:
      storeTimeoutMs === undefined
        ? defaults.storeTimeoutMs
        : storeTimeoutOf(storeTimeoutMs, TollgateArgumentError, 'decision option storeTimeoutMs'),
  }
}

export function resetsParents(options: unknown): boolean {
  if (options === undefined) return false
  const { parents = false } = checkOptionsObject(options, RESET_OPTION_KEYS, 'reset options', {
    shape: '{ parents }',
    Failure: TollgateArgumentError,
  })
  if (typeof parents !== 'boolean') {
    throw new TollgateArgumentError(`reset option parents must be a boolean, got ${describeValue(parents)}`)
  }
  return parents
}
