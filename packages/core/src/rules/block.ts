import { type Duration, formatDuration, parseDuration } from '../support/duration.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, optionKeys } from '../support/option-objects.js'

/**
 * A lockout: once a rule has refused an identifier `after` times, that identifier is refused
 * outright for `for`, whatever its windows hold. `factor` lengthens each next block of the same
 * identifier while its last one is remembered, up to `max` (exponential back-off for brute force).
 */
export interface BlockOptions {
  /**
   * How long a block lasts (the first one, when `factor` grows the next).
   * @example '15 minutes'
   */
  for: Duration
  /**
   * Refusals by the rule's windows that start a block, counted while each comes within the
   * rule's longest period of the first. Refusals by a block in force do not count.
   * @default 1
   */
  after?: number
  /**
   * Each block of an identifier whose last block is remembered (for as long as that block lasted,
   * after it ended) lasts this many times the last.
   * @default 1
   */
  factor?: number
  /**
   * The longest a block grows to by `factor`.
   * @default `for` when factor is 1; else 1 day, or `for` if that is longer
   */
  max?: Duration
}

/** A rule's block, resolved; the rule's name keeps it apart from another rule's in tools. */
export interface RuleBlock {
  readonly forMs: number
  readonly after: number
  readonly factor: number
  readonly maxMs: number
  /** How the decide script reads it, after the windows of the target's spec (lua/lib/lockout.lua). */
  readonly spec: string
}

const BLOCK_KEYS = optionKeys<BlockOptions>({ for: true, after: true, factor: true, max: true })
const MAX_AFTER = 1_000
const MAX_FACTOR = 1_000
const DAY_MS = 86_400_000

export function blockOf(raw: unknown, where: string): RuleBlock {
  const at = `${where}: block`
  const options = checkOptionsObject(raw, BLOCK_KEYS, at, { shape: "{ for: '15m', after?, factor?, max? }" })
  const forMs = durationOf(options.for, `${at}.for`)
  const { after = 1, factor = 1 } = options
  if (typeof after !== 'number' || !Number.isInteger(after) || after < 1 || after > MAX_AFTER) {
    throw new TollgateConfigError(`${at}.after must be an integer from 1 to ${MAX_AFTER}, got ${describeValue(after)}`)
  }
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1 || factor > MAX_FACTOR) {
    throw new TollgateConfigError(`${at}.factor must be a number from 1 to ${MAX_FACTOR}, got ${describeValue(factor)}`)
  }
  const maxMs =
    options.max === undefined ? (factor === 1 ? forMs : Math.max(forMs, DAY_MS)) : durationOf(options.max, `${at}.max`)
  if (maxMs < forMs) {
    throw new TollgateConfigError(
      `${at}.max (${formatDuration(maxMs)}) must be at least for (${formatDuration(forMs)}): blocks only grow`,
    )
  }
  return { forMs, after, factor, maxMs, spec: `#${forMs} ${after} ${factor} ${maxMs}` }
}

function durationOf(raw: unknown, where: string): number {
  const ms = parseDuration(raw)
  if (typeof ms === 'string') throw new TollgateConfigError(`${where} ${ms}`)
  return ms
}
