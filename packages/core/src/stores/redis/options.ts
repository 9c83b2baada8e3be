import { clientCloser } from '../../redis-clients/client-closer.js'
import type { RedisConnection } from '../../redis-clients/connection.js'
import { connectionOf } from '../../redis-clients/connection-of.js'
import type { RedisClientLike } from '../../redis-clients/ioredis.js'
import type { NodeRedisClientLike } from '../../redis-clients/node-redis.js'
import { type Clock, clockOption } from '../../support/clock.js'
import { describeValue, TollgateConfigError } from '../../support/errors.js'
import { checkOptionsObject, integerOption, optionKeys } from '../../support/option-objects.js'

export interface RedisStoreOptions {
  /**
   * An ioredis (or iovalkey) client: `new Redis(…)` (standalone or Sentinel) or `new Cluster(…)`;
   * or a node-redis client, connected: `createClient()`, `createCluster()` or `createSentinel()`
   * (v4 to v6). Closed by the store only with `closeClient`. It listens to the client's error
   * events until `close()`, so that a decision that times out can say what Redis last said (a
   * refused AUTH, say); ioredis then no longer prints those errors itself, so listen to them too
   * if you log them.
   */
  client: RedisClientLike | NodeRedisClientLike
  /**
   * Whether `close()` (and so `limiter.close()`) also closes `client`, with `quit()`, which waits
   * for the replies of commands already sent: for a client made for this store alone, so that a
   * script ends once its limiter is closed. Leave it `false` for a client other code still uses.
   * @default false
   * @example new RedisStore({ client: new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'), closeClient: true })
   */
  closeClient?: boolean
  /**
   * Prepended to every key. Must not contain `{` or `}` (Cluster hash tags).
   * @default 'tg:'
   */
  prefix?: string
  /**
   * Where time comes from. By default the Redis server's `TIME`, so that app servers whose
   * clocks disagree still share one timeline; pass a clock where scripts may not call TIME,
   * or in tests. It must return whole milliseconds since the epoch (0 to 8.64e15): a decision
   * whose clock returns anything else fails as a store error, code `TG_STORE`, its message
   * naming the value, and sends nothing to Redis.
   * @default undefined (server time)
   * @example () => Date.now()
   */
  clock?: Clock
  /**
   * Refusals answered in the process: once Redis refused a request until some time, the same
   * rule and identifiers asking for at least that cost are refused here until then, or for
   * `maxHoldMs` if that ends sooner, with no round trip: a client hammering a key it is refused
   * on costs Redis one round trip per `maxHoldMs`. It holds at most `maxEntries` refusals (the
   * oldest goes first). Its one difference from asking Redis: a refund or reset made by another
   * process (an operator's `tollgate reset`) reaches this one within `maxHoldMs`, not at once
   * (one made through this store does). Its `remaining` figures are Redis's at the refusal.
   * `false` asks Redis every time.
   * @default { maxEntries: 10000, maxHoldMs: 1000 }
   * @example new RedisStore({ client, refusalCache: false })
   */
  refusalCache?: false | { maxEntries?: number; maxHoldMs?: number }
}

const OPTION_KEYS = optionKeys<RedisStoreOptions>({
  client: true,
  closeClient: true,
  prefix: true,
  clock: true,
  refusalCache: true,
})

/** A RedisStore's options, checked: every error names the option and the value. */
export interface RedisConfig {
  readonly connection: RedisConnection
  readonly prefix: string
  readonly clock: Clock | undefined
  /** What `close()` calls last: quits the client when `closeClient` gave it to the store. */
  readonly closeClient: (() => Promise<void>) | undefined
  /** Undefined for `refusalCache: false`. */
  readonly refusalCache: { maxEntries: number; maxHoldMs: number } | undefined
}

export function redisConfigOf(options: RedisStoreOptions): RedisConfig {
  checkOptionsObject(options, OPTION_KEYS, 'RedisStore options', { shape: '{ client }' })
  const { client, prefix = 'tg:', clock, refusalCache } = options
  const connection = connectionOf(client, 'RedisStore option client')
  if (clock !== undefined) clockOption(clock, 'RedisStore')
  const closeClient = clientCloser(options.closeClient, connection, 'RedisStore')
  return { connection, prefix, clock, closeClient, refusalCache: refusalCacheOf(refusalCache) }
}

const DEFAULT_REFUSAL_CACHE = { maxEntries: 10_000, maxHoldMs: 1_000 }

function refusalCacheOf(option: unknown): { maxEntries: number; maxHoldMs: number } | undefined {
  if (option === undefined) return DEFAULT_REFUSAL_CACHE
  if (option === false) return undefined
  if (option === null || typeof option !== 'object') {
    throw new TollgateConfigError(
      `RedisStore option refusalCache must be false or an object { maxEntries, maxHoldMs }, got ${describeValue(option)}`,
    )
  }
  const { maxEntries = DEFAULT_REFUSAL_CACHE.maxEntries, maxHoldMs = DEFAULT_REFUSAL_CACHE.maxHoldMs } =
    checkOptionsObject(option, REFUSAL_CACHE_KEYS, 'RedisStore option refusalCache')
  return {
    maxEntries: integerOption(maxEntries, 1, 10_000_000, 'RedisStore option refusalCache.maxEntries'),
    maxHoldMs: integerOption(maxHoldMs, 1, 3_600_000, 'RedisStore option refusalCache.maxHoldMs'),
  }
}

const REFUSAL_CACHE_KEYS = optionKeys<{ maxEntries?: number; maxHoldMs?: number }>({
  maxEntries: true,
  maxHoldMs: true,
})
