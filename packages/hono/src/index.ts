import {
  createRateLimit,
  type Decision,
  describeValue,
  forwardedClientAddress,
  type RateLimit,
  type RateLimitOptions,
  TollgateConfigError,
  type TrustProxy,
} from '@tollgate/core'
import type { Context, Env, MiddlewareHandler } from 'hono'
import { ANSWER, Answer } from './answer.js'
import { nodeSocketAddress } from './node-socket-address.js'

export type { Decision, RateLimitOptions } from '@tollgate/core'
export { byIpAndUser, ipIdentifier, userIdentifier } from '@tollgate/core'

declare module 'hono' {
  interface ContextVariableMap {
    /** The decision for this request, set by `rateLimit` when it lets the request through; undefined when skipped. */
    rateLimit: Decision | undefined
  }
}

/**
 * What Hono's own middlewares default their `Env` to: the middleware then fits any app, and the
 * options' functions read the app's variables (`c.get('user')`) without naming its `Env`.
 */
// biome-ignore lint/suspicious/noExplicitAny: Hono's convention, for the reason above.
type AnyEnv = any

/**
 * The options of `rateLimit`: `@tollgate/core`'s HTTP options, with Hono's `Context` as the
 * request, and how to find the client address, which Hono leaves to the runtime.
 */
export interface HonoRateLimitOptions<E extends Env = AnyEnv> extends RateLimitOptions<Context<E>> {
  /**
   * The runtime's `getConnInfo`, which knows the address of the connecting peer: from `hono/bun`,
   * `hono/deno`, `hono/cloudflare-workers`, `@hono/node-server/conninfo` and the like.
   * @default on `@hono/node-server`, its socket's address, read as its `getConnInfo` reads it;
   * elsewhere none: every request then counts as `ip:unknown`, with a warning (`TG_NO_CLIENT_ADDRESS`)
   * @example import { getConnInfo } from 'hono/bun' // then rateLimit({ windows, getConnInfo })
   */
  getConnInfo?: (c: Context<E>) => { remote: { address?: string | undefined } }
  /**
   * Which peers are proxies whose `X-Forwarded-For` names the client, as Express's `trust proxy`:
   * `true` trusts them all, so that the client is the header's first address; a function trusts
   * each address it returns true for, and the client is the first address, read from the peer
   * leftwards through the header, that it does not trust.
   * @default false: the peer is the client, and an `X-Forwarded-For` that arrives is only warned of
   * (`TG_UNTRUSTED_FORWARDED_FOR`, once)
   * @example (address) => address === '10.0.0.1'
   */
  trustProxy?: TrustProxy
}

export interface RateLimitMiddleware<E extends Env = AnyEnv> extends MiddlewareHandler<E> {
  /** The engine deciding for this middleware: its options, limiter and rule. */
  readonly limit: RateLimit<Context<E>>
  /** Closes the limiter if this middleware made it (from `rules` or `windows`); a `limiter` passed in stays open. */
  close(): Promise<void>
}

type Answered = { [ANSWER]?: Answer }

/**
 * Hono middleware that charges each request against a rule, sets the rate limit headers, and
 * answers 429 (413 for a cost that can never fit, 503 when the store fails and `onStoreError` is
 * `'deny'`) with a problem+json body, or with the response `refusal` builds. Handlers find the
 * decision at `c.get('rateLimit')`. Every option is checked here, so a bad one throws
 * `TollgateConfigError` at startup.
 * @example app.post('/login', rateLimit({ windows: [{ limit: 5, period: '1m' }] }), login)
 */
export function rateLimit<E extends Env = AnyEnv>(options: HonoRateLimitOptions<E>): RateLimitMiddleware<E> {
  const [{ getConnInfo, trustProxy = false }, coreOptions] = splitOptions(options)
  if (typeof trustProxy !== 'boolean' && typeof trustProxy !== 'function') {
    throw new TollgateConfigError(
      `option trustProxy must be a boolean or a function of an address, got ${describeValue(trustProxy)}`,
    )
  }
  if (getConnInfo !== undefined && typeof getConnInfo !== 'function')
    throw new TollgateConfigError(`option getConnInfo must be a function, got ${describeValue(getConnInfo)}`)
  const peerOf = getConnInfo ? (c: Context<E>) => getConnInfo(c).remote.address : nodeSocketAddress
  const limit = createRateLimit<Context<E>>(coreOptions, HONO_OPTIONS)

  const middleware: MiddlewareHandler<E> = async (c, next) => {
    const forwardedFor = c.req.header('x-forwarded-for')
    const peer = peerOf(c)
    // One Answer per request, made by the outermost rateLimit, so that a rule applied twice is
    // charged once, and reported by it, once every middleware within has had its say.
    const held = c as Context<E> & Answered
    const earlier = held[ANSWER]
    const answer = earlier ?? new Answer(c.req.raw)
    if (!earlier) held[ANSWER] = answer
    const checked = limit.checkNow(c, {
      ip: forwardedClientAddress(peer, forwardedFor, trustProxy),
      forwardedFor,
      proxyTrusted: trustProxy !== false,
      socketAddress: peer,
      response: answer,
      method: c.req.method,
      url: c.req.path,
    })
    const verdict = checked instanceof Promise ? await checked : checked
    // Onto c.res rather than through c.header(): Hono copies the fields of c.res onto whatever
    // response follows, a bare `new Response()` or an HTTPException's included.
    const { headers } = c.res
    for (const [name, value] of Object.entries(verdict.headers)) headers.set(name, value)
    if (verdict.action === 'respond') {
      const { body, status, contentType } = verdict
      // Bytes come as a Node Buffer, which Hono's types do not take as they are.
      return c.newResponse(typeof body === 'string' ? body : new Uint8Array(body), {
        // Core sends only statuses from 200 to 599.
        status: status as Parameters<Context['status']>[0],
        headers: { 'Content-Type': contentType },
      })
    }
    c.set('rateLimit', verdict.decision)
    await next()
    if (!earlier) answer.answered(c.res.status)
  }
  return Object.assign(middleware, { limit, close: () => limit.close() })
}

const HONO_OPTIONS = ['getConnInfo', 'trustProxy']

type HonoOnly<E extends Env> = Pick<HonoRateLimitOptions<E>, 'getConnInfo' | 'trustProxy'>

/** Core rejects keys it does not know, so the Hono-only options leave before the rest reach it. */
function splitOptions<E extends Env>(options: HonoRateLimitOptions<E>): [HonoOnly<E>, RateLimitOptions<Context<E>>] {
  // Anything but an object goes to core as given, for core's own error.
  if (typeof options !== 'object' || options === null) return [{}, options]
  const { getConnInfo, trustProxy, ...coreOptions } = options
  return [{ getConnInfo, trustProxy }, coreOptions]
}
