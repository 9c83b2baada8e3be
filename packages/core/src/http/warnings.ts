import { LIMITER_WARNING_CODES } from '../limiter/limiter-warnings.js'
import type { AddressFallback } from './client-address.js'
import type { UnusableIdentifier } from './usable-identifiers.js'

/** What the HTTP engine warns of, once per engine each: the set-up, seen in the requests it gets. */

/**
 * The warnings a middleware gives its `onWarning`, by code (docs/errors.md): its own and those of
 * the limiter it makes from `rules` or `windows`; what its `ignoreWarnings` option may name.
 */
export const RATE_LIMIT_WARNING_CODES = [
  'TG_UNTRUSTED_FORWARDED_FOR',
  'TG_FORWARDED_FOR_UNUSED',
  'TG_NO_CLIENT_ADDRESS',
  'TG_UNPARSEABLE_CLIENT_ADDRESS',
  'TG_UNUSABLE_IDENTIFIER',
  'TG_REFUND_FAILED',
  'TG_SETTLE_FAILED',
  'TG_RULE_APPLIED_TWICE',
  'TG_LIMITER_PER_REQUEST',
  ...LIMITER_WARNING_CODES,
] as const

export type RateLimitWarningCode = (typeof RATE_LIMIT_WARNING_CODES)[number]

/** The identifier every request without a client address shares. */
export const NO_ADDRESS = 'ip:unknown'

export const UNTRUSTED_FORWARDED_FOR =
  'X-Forwarded-For arrived but no proxy is trusted, so clients are told apart by the address of whatever connected (perhaps a proxy, counting all its clients as one); set your framework to trust your proxy, or ignore this if nothing sits in front'
export const FORWARDED_FOR_UNUSED =
  "X-Forwarded-For arrived but the client address decided on is the connecting peer's: the framework's proxy setting does not trust the peer that sent it (Fastify 5 trusts no peer for a hop count such as trustProxy: 1), so every client behind that proxy counts as the proxy; trust the proxy's address instead, or ignore this if the header came from a client directly"
export const NO_CLIENT_ADDRESS = `a request arrived without a client address; such requests share one identifier, ${NO_ADDRESS}`
export const ADDRESS_FALLBACK: Readonly<Record<AddressFallback, string>> = {
  'port-removed':
    'a client address arrived with a port (as some load balancers append to X-Forwarded-For); it is counted without the port',
  digest:
    'a client address arrived that is not an IP address (a proxy may have sent X-Forwarded-For: unknown); such requests are counted under ip:#<digest of the text>, shared by every request with the same text',
}
export const UNUSABLE_IDENTIFIER: Readonly<Record<UnusableIdentifier | 'threw', string>> = {
  'not-a-string':
    'identify returned something other than a non-empty string as an identifier; it is left out of the decision',
  'too-long':
    'identify returned an identifier longer than 16,384 characters; it is counted as its kind and a digest, such as user:#<digest>',
  none: "identify returned no usable identifier; the request is counted for the client's address",
  threw: "identify threw a TollgateArgumentError; the request is counted for the client's address",
}

export const LIMITER_PER_REQUEST =
  'a rate limit middleware is made for each request, as in app.use((req, res, next) => rateLimit(options)(req, res, next)): every request builds one, its options checked again and, from rules or windows, a limiter of its own, whose in-memory counts start from nothing each time, so nothing is limited unless the store is shared; make the middleware once, as the app starts, and use that one for every request (and give a check by hand the same route options object each time). Tests that make an app each, send it a single request in the process and never close it can look the same: ignore the code there (ignoreWarnings)'

/** The route as the path asked for: a query string may carry tokens, which have no place in a log. */
export function appliedTwice(
  rule: string,
  { method, url }: { method?: string | undefined; url?: string | undefined },
): string {
  const path = url?.split('?', 1)[0]
  const route = path === undefined ? 'a request' : method === undefined ? path : `${method} ${path}`
  return `rule '${rule}' was applied twice to ${route} (two middlewares or hooks with the same limiter): the request is charged once, and the second answers with the first one's verdict, whatever options of its own it has; remove one of the two applications`
}
