import type { Decision } from '../rules/decision.js'
import { identifierKind } from '../rules/identifier-kind.js'
import { tightestPerPolicy } from './headers.js'
import { policyName } from './policy-name.js'
import { retryAfterSeconds } from './retry-after.js'

/** An RFC 9457 problem details object. */
export type ProblemDetails = Record<string, unknown> & { type: string; title: string; status: number }

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

/**
 * Whether the refusal is one retrying can never change: the request costs more than a window
 * admits in a whole period (`retryAfterMs` is `Infinity`).
 */
export function neverFits(decision: Decision): boolean {
  return !decision.allowed && decision.retryAfterMs === Number.POSITIVE_INFINITY
}

/**
 * The status of a refusal by a limit: 429, or 413 Content Too Large for a request that costs
 * more than a window can ever admit. A 429 without `Retry-After` has clients back off and send
 * the same request again for nothing; 413 is a status they do not retry, and says what to change.
 */
export function refusalStatus(decision: Decision): 413 | 429 {
  return neverFits(decision) ? 413 : 429
}

/**
 * The body of a refusal by a limit: the ratelimit draft's `quota-exceeded` type, naming the
 * refusing windows in `violated-policies` and what their identifiers count in `identifier-kinds`
 * (`ip`, `user`: the part of an identifier before its first `:`), never the identifiers, which
 * may be personal data. `status` is `refusalStatus(decision)`; for a request that can never fit,
 * `detail` names the windows too small for it with their limits, and `retry-after` is null.
 */
export function quotaExceededProblem(decision: Decision): ProblemDetails {
  const violated = tightestPerPolicy(decision.windows).filter((w) => w.failed)
  const names = (windows: typeof violated) => windows.map((w) => policyName(w.rule, w.periodMs, w.limit)).join(', ')
  const retryAfter = retryAfterSeconds(decision) ?? null
  const tooSmall = violated.filter((w) => w.limit < decision.cost)
  return {
    type: QUOTA_EXCEEDED,
    title: 'Request cannot be satisfied as assigned quota has been exceeded',
    status: refusalStatus(decision),
    detail: neverFits(decision)
      ? `This request costs ${decision.cost}, more than ${tooSmall.map((w) => `${policyName(w.rule, w.periodMs, w.limit)} admits (${w.limit})`).join(' or ')}; retrying will not help, a smaller request may pass.`
      : `Quota exceeded for ${names(violated)}; retry in ${retryAfter} s.`,
    'violated-policies': violated.map((w) => policyName(w.rule, w.periodMs, w.limit)),
    'identifier-kinds': refusingKinds(decision),
    'retry-after': retryAfter,
  }
}

/** Every refusing window's, not only the tightest per policy's: the IP and the user may both refuse. */
function refusingKinds(decision: Decision): string[] {
  const kinds: string[] = []
  for (const window of decision.windows) {
    if (!window.failed) continue
    const kind = identifierKind(window.identifier)
    if (kind !== undefined && !kinds.includes(kind)) kinds.push(kind)
  }
  return kinds
}

/** The 503 body when the store failed and the policy is to deny. */
export function storeUnavailableProblem(decision: Decision): ProblemDetails {
  return {
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: 'The rate limiter cannot reach its store, and this route refuses requests it cannot count.',
    'retry-after': retryAfterSeconds(decision) ?? null,
  }
}

/** The 503 body when the limiter had its whole backlog waiting for the store (reason `overloaded`). */
export function overloadedProblem(decision: Decision): ProblemDetails {
  return {
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: 'The rate limiter has more requests waiting for its store than it keeps; retry shortly.',
    'retry-after': retryAfterSeconds(decision) ?? null,
  }
}
