/**
 * A window's name in headers and problem bodies: `<rule>-<period>`, e.g. `auth.createToken-60s`.
 * It must be a valid Structured Field String, so characters outside printable ASCII are
 * percent-encoded (UTF-8) and `"`, `\` are escaped by the serializer, not here.
 */
export function policyName(rule: string, periodMs: number): string {
  const period = periodMs % 1000 === 0 ? `${periodMs / 1000}s` : `${periodMs}ms`
  return `${rule.replace(/[^\x20-\x7e]+/g, (run) => encodeURIComponent(run))}-${period}`
}
