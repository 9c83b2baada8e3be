/**
 * A window's name in headers and problem bodies: `<rule>-<period>`, e.g. `auth.createToken-60s`.
 * It must be a valid Structured Field String, so `%` and characters outside printable ASCII are
 * percent-encoded as UTF-8 (`%` too, so that two rule names never share a policy name); `"` and
 * `\` are escaped by the serializer, not here. Lone surrogates encode as U+FFFD rather than throw.
 */
export function policyName(rule: string, periodMs: number): string {
  const period = periodMs % 1000 === 0 ? `${periodMs / 1000}s` : `${periodMs}ms`
  const safe = rule.replace(/[^\x20-\x24\x26-\x7e]+/g, (run) =>
    [...Buffer.from(run, 'utf8')].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  )
  return `${safe}-${period}`
}
