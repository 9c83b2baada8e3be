/**
 * What one request has been charged for: each rule a limiter applied to it, for which
 * identifiers, with the verdict reached or still pending. A rule mounted twice on one request (an
 * app-wide middleware and a route's, a plugin's hook and a check by hand) is then charged once:
 * the second application takes the first one's verdict, or waits for it when both are in flight.
 *
 * Kept on the request's response, the one object every adapter hands over for both applications,
 * under a symbol of this module rather than in a WeakMap keyed by it: a WeakMap entry per request
 * is an ephemeron the collector has to trace on every request, where a property simply goes with
 * its response. Either way nothing outlives the request.
 */
const APPLIED = Symbol('tollgate: rules applied to this request')

interface AppliedRule<Verdict> {
  readonly limiter: object
  readonly rule: string
  readonly identifiers: string | readonly string[]
  readonly verdict: Verdict
  /** The rule applied before it: a request rarely sees more than two, so a list beats a map. */
  readonly earlier: AppliedRule<Verdict> | undefined
}

interface Charged<Verdict> {
  [APPLIED]?: AppliedRule<Verdict>
}

/** The verdict `limiter` already reached, or is reaching, on this rule and these identifiers for this response. */
export function appliedBefore<Verdict>(
  response: object,
  limiter: object,
  rule: string,
  identifiers: string | readonly string[],
): Verdict | undefined {
  for (let applied = (response as Charged<Verdict>)[APPLIED]; applied; applied = applied.earlier) {
    if (applied.limiter === limiter && applied.rule === rule && sameIdentifiers(applied.identifiers, identifiers))
      return applied.verdict
  }
  return undefined
}

export function rememberApplied<Verdict>(
  response: object,
  limiter: object,
  rule: string,
  identifiers: string | readonly string[],
  verdict: Verdict,
): void {
  const charged = response as Charged<Verdict>
  charged[APPLIED] = { limiter, rule, identifiers, verdict, earlier: charged[APPLIED] }
}

/**
 * The same counters, in whatever order: another `identify` on the same rule (the address here,
 * the user there) charges counters of its own, so it is a second limit, not the same one twice.
 */
function sameIdentifiers(a: string | readonly string[], b: string | readonly string[]): boolean {
  if (typeof a === 'string' && typeof b === 'string') return a === b
  const left = typeof a === 'string' ? [a] : a
  const right = typeof b === 'string' ? [b] : b
  // Each list holds distinct identifiers (usable-identifiers.ts keeps a repeated one once), a handful at most.
  return left.length === right.length && left.every((identifier) => right.includes(identifier))
}
