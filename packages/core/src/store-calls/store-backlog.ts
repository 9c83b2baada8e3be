import type { Decision } from '../rules/decision.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, integerOption, optionKeys } from '../support/option-objects.js'

export interface BacklogOptions {
  /**
   * The most decisions one limiter keeps waiting for its store at once. It bounds the memory a
   * flood can take (each waiting decision holds its command, its promise and its request), not
   * healthy load: the default holds a burst of ten thousand concurrent decisions in one process
   * with room to spare (docs/production.md, "Under a flood").
   * @default 20000
   */
  max?: number
  /**
   * What a decision does when `max` decisions are already waiting: `'refuse'` answers it at
   * once, refused with reason `overloaded` (the adapters answer 503 with `Retry-After`);
   * `'wait'` queues it in the process until a waiting decision ends, then asks the store. Either
   * way it is never let through unlimited.
   * @default 'refuse'
   */
  whenFull?: 'refuse' | 'wait'
}

export type BacklogSettings = Readonly<Required<BacklogOptions>>

const OPTION_KEYS = optionKeys<BacklogOptions>({ max: true, whenFull: true })

export const DEFAULT_BACKLOG_MAX = 20_000

export function backlogSettingsOf(options: unknown): BacklogSettings {
  const { max = DEFAULT_BACKLOG_MAX, whenFull = 'refuse' } = checkOptionsObject(
    options ?? {},
    OPTION_KEYS,
    'createLimiter option backlog',
  )
  if (whenFull !== 'refuse' && whenFull !== 'wait') {
    throw new TollgateConfigError(
      `createLimiter option backlog.whenFull must be 'refuse' or 'wait', got ${describeValue(whenFull)}`,
    )
  }
  return { max: integerOption(max, 1, 10_000_000, 'createLimiter option backlog.max'), whenFull }
}

/** How long a client refused for the backlog is asked to wait: a backlog drains within about that. */
const RETRY_AFTER_OVERLOADED_MS = 1_000

/** The decision of a request refused because the limiter's backlog is full. */
export function overloadedDecision(rule: string, cost: number): Decision {
  return {
    allowed: false,
    reason: 'overloaded',
    rule,
    cost,
    retryAfterMs: RETRY_AFTER_OVERLOADED_MS,
    nowMs: Date.now(),
    windows: [],
  }
}
