/**
 * Options of the rate limiters people move from, which Tollgate names otherwise. An unknown option
 * that is one of these is refused with the Tollgate option that replaces it and the section of
 * docs/migrating.md that maps the rest: the first thing someone who moves tries is the option they
 * know. None of these keys is one of Tollgate's own in the same place (a test checks it), so a
 * hint is only ever given for an option that was refused anyway.
 */

const MIGRATING = 'https://github.com/tollgate-js/tollgate/blob/main/docs/migrating.md'

type Library = 'express-rate-limit' | '@fastify/rate-limit' | 'koa-ratelimit' | 'rate-limiter-flexible'

const SECTIONS: Readonly<Record<Library, string>> = {
  'express-rate-limit': '#from-express-rate-limit',
  '@fastify/rate-limit': '#from-fastifyrate-limit',
  'koa-ratelimit': '#from-koa-ratelimit',
  'rate-limiter-flexible': '#from-rate-limiter-flexible',
}

interface ForeignOption {
  /** The libraries that take it, the first one's section linked. */
  readonly from: readonly [Library, ...Library[]]
  /** What replaces it, as it is written in Tollgate's options. */
  readonly use: string
}

/** Options of one place, as `checkOptionsObject` takes them: key → the sentence that names ours. */
export type ForeignOptions = ReadonlyMap<string, string>

const WINDOWS =
  "windows: [{ limit, period }], such as windows: [{ limit: 100, period: '15m' }] (period: milliseconds or '15m')"
const RULE_WINDOWS =
  "a rule's windows: rules: { api: { windows: [{ limit: 100, period: '15m' }] } } (period: milliseconds or '15m')"
const REDIS_STORE = 'store: new RedisStore({ client }) (an ioredis client)'

/** Where a rate limit middleware's options go: the adapters' `rateLimit(…)`, the Fastify plugin, a route's `config.rateLimit`. */
const MIDDLEWARE: Readonly<Record<string, ForeignOption>> = {
  windowMs: { from: ['express-rate-limit'], use: WINDOWS },
  limit: { from: ['express-rate-limit'], use: `${WINDOWS}; a limit per request is rule: (req) => name` },
  max: {
    from: ['express-rate-limit', '@fastify/rate-limit', 'koa-ratelimit'],
    use: `${WINDOWS}; a limit per request is rule: (req) => name`,
  },
  timeWindow: { from: ['@fastify/rate-limit'], use: WINDOWS },
  duration: { from: ['koa-ratelimit', 'rate-limiter-flexible'], use: WINDOWS },
  points: { from: ['rate-limiter-flexible'], use: WINDOWS },
  keyGenerator: {
    from: ['express-rate-limit', '@fastify/rate-limit'],
    use: 'identify: (req, client) => identifier(s), such as byIpAndUser((req) => req.user?.id)',
  },
  id: { from: ['koa-ratelimit'], use: 'identify: (ctx, client) => identifier(s)' },
  standardHeaders: {
    from: ['express-rate-limit'],
    use: "headers: 'draft-10' (the default), 'draft-8', 'draft-7' or 'draft-6'",
  },
  legacyHeaders: { from: ['express-rate-limit'], use: "headers: 'legacy' (one format per middleware)" },
  addHeaders: { from: ['@fastify/rate-limit'], use: "headers: 'draft-10' (the default), 'legacy' or false" },
  addHeadersOnExceeding: { from: ['@fastify/rate-limit'], use: "headers: 'draft-10' (the default), 'legacy' or false" },
  enableDraftSpec: { from: ['@fastify/rate-limit'], use: "headers: 'draft-10' (the default)" },
  disableHeader: { from: ['koa-ratelimit'], use: 'headers: false' },
  handler: {
    from: ['express-rate-limit'],
    use: 'refusal: (decision, req, standard) => response, which builds the whole refusal',
  },
  message: {
    from: ['express-rate-limit'],
    use: 'problem: (decision, req) => body, or refusal: (decision, req, standard) => response',
  },
  statusCode: { from: ['express-rate-limit'], use: 'refusal: (decision, req, standard) => ({ ...standard, status })' },
  errorResponseBuilder: { from: ['@fastify/rate-limit'], use: 'refusal: (decision, req, standard) => response' },
  errorMessage: {
    from: ['koa-ratelimit'],
    use: 'problem: (decision, ctx) => body, or refusal: (decision, ctx, standard) => response',
  },
  skipSuccessfulRequests: { from: ['express-rate-limit'], use: "countOnly: 'failures'" },
  skipFailedRequests: { from: ['express-rate-limit'], use: "countOnly: 'successes'" },
  requestWasSuccessful: { from: ['express-rate-limit'], use: 'countOnly: ({ status, request }) => boolean' },
  allowList: { from: ['@fastify/rate-limit'], use: 'skip: (req) => boolean' },
  whitelist: { from: ['koa-ratelimit'], use: 'skip: (ctx) => boolean' },
  onExceeded: { from: ['@fastify/rate-limit'], use: 'onLimited: (req, decision) => void' },
  passOnStoreError: { from: ['express-rate-limit'], use: "onStoreError: 'allow' (the default) or 'deny'" },
  validate: {
    from: ['express-rate-limit'],
    use: "ignoreWarnings: ['TG_UNTRUSTED_FORWARDED_FOR'], which turns warnings off by their codes",
  },
  skipOnError: { from: ['@fastify/rate-limit'], use: "onStoreError: 'allow' (the default) or 'deny'" },
  redis: { from: ['@fastify/rate-limit'], use: REDIS_STORE },
  db: { from: ['koa-ratelimit'], use: REDIS_STORE },
  driver: { from: ['koa-ratelimit'], use: `${REDIS_STORE}, or no store for the in-memory one` },
  storeClient: { from: ['rate-limiter-flexible'], use: REDIS_STORE },
}

/** Where a limiter's options go: `createLimiter(…)`. */
const LIMITER: Readonly<Record<string, ForeignOption>> = {
  windowMs: { from: ['express-rate-limit'], use: RULE_WINDOWS },
  limit: { from: ['express-rate-limit'], use: RULE_WINDOWS },
  max: { from: ['express-rate-limit', '@fastify/rate-limit', 'koa-ratelimit'], use: RULE_WINDOWS },
  points: { from: ['rate-limiter-flexible'], use: RULE_WINDOWS },
  duration: { from: ['rate-limiter-flexible', 'koa-ratelimit'], use: RULE_WINDOWS },
  storeClient: { from: ['rate-limiter-flexible'], use: REDIS_STORE },
  keyPrefix: { from: ['rate-limiter-flexible'], use: "store: new RedisStore({ client, prefix: 'app:' })" },
  redis: { from: ['@fastify/rate-limit'], use: REDIS_STORE },
}

function sentences(table: Readonly<Record<string, ForeignOption>>): ForeignOptions {
  return new Map(
    Object.entries(table).map(([key, { from, use }]) => {
      const owners = from.length === 1 ? from[0] : `${from.slice(0, -1).join(', ')} and ${from.at(-1)}`
      return [key, `${key} is ${owners}'s option; Tollgate's is ${use} (${MIGRATING}${SECTIONS[from[0]]})`]
    }),
  )
}

export const MIDDLEWARE_FOREIGN_OPTIONS: ForeignOptions = sentences(MIDDLEWARE)
export const LIMITER_FOREIGN_OPTIONS: ForeignOptions = sentences(LIMITER)
