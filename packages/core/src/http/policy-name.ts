import { formatDuration } from '../support/duration.js'
import { INLINE_RULE_PREFIX } from './rule-names.js'

/**
 * A window's name in headers and problem bodies: `<rule>-<period>`, e.g. `auth.createToken-60s`.
 * Inline windows given no `rule` are named by what they admit, `<limit>-in-<period>` (`100-in-1m`,
 * as express-rate-limit names its policies), since their rule's name (`inline:sliding-log:100/1m`)
 * speaks to the code that keys the counts, not to a client. It must be a valid Structured Field
 * String, so `%` and characters outside printable ASCII are percent-encoded as UTF-8 (`%` too, so
 * that two rule names never share a policy name); `"` and `\` are escaped by the serializer, not
 * here. Lone surrogates encode as U+FFFD rather than throw.
 */
export function policyName(rule: string, periodMs: number, limit?: number): string {
  if (limit !== undefined && rule.startsWith(INLINE_RULE_PREFIX)) return `${limit}-in-${formatDuration(periodMs)}`
  const period = periodMs % 1000 === 0 ? `${periodMs / 1000}s` : `${periodMs}ms`
  const safe = rule.replace(/[^\x20-\x24\x26-\x7e]+/g, (run) =>
    [...Buffer.from(run, 'utf8')].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  )
  return `${safe}-${period}`
}
