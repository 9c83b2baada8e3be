import { setImmediate as turn } from 'node:timers/promises'
import {
  ALGORITHMS,
  type AlgorithmName,
  createLimiter,
  HybridStore,
  type Limiter,
  MemoryStore,
  RedisStore,
  type Store,
  type WindowOptions,
} from '@tollgate/core'
import { type Contender, type Decider, requireClient, type SetupOptions, type StoreKind } from './contender.js'

/**
 * Long enough that a slow answer on a busy machine is measured as slow rather than replaced by
 * a fail-open decision; the timer it arms per decision costs the same whatever its length.
 */
export const STORE_TIMEOUT_MS = 60_000

/** The `two-by-two` rule: the first window as given, the second a tenth of it over a sixtieth of the period. */
export function windowsOf(options: Pick<SetupOptions, 'shape' | 'limit' | 'periodMs'>): WindowOptions[] {
  const first = { limit: options.limit, period: options.periodMs }
  if (options.shape === 'one-window') return [first]
  return [first, { limit: Math.max(1, Math.ceil(options.limit / 10)), period: Math.max(1_000, options.periodMs / 60) }]
}

/** Decisions on the limiter's rule `r`, as every Tollgate process of the bench makes them; its teardown closes the limiter and its store. */
export function deciderOf(limiter: Limiter): Decider {
  return {
    async decide(identifiers) {
      const decision = await limiter.consume('r', identifiers)
      if (decision.error) throw decision.error
      return decision.allowed
    },
    teardown: () => limiter.close(),
  }
}

/** A limiter of one rule on `store`, deciding as a contender does. */
function deciderOn(store: Store, algorithm: AlgorithmName, options: SetupOptions): Decider {
  return deciderOf(
    createLimiter({
      store,
      rules: { r: { algorithm, windows: windowsOf(options) } },
      storeTimeoutMs: STORE_TIMEOUT_MS,
      onWarning: () => {},
    }),
  )
}

function tollgate(store: StoreKind, algorithm: AlgorithmName): Contender {
  return {
    id: `tollgate/${store}/${algorithm}`,
    library: 'Tollgate',
    variant: `${algorithm} (${store === 'redis' ? 'RedisStore' : 'MemoryStore'})`,
    store,
    role: 'tollgate',
    shapes: ['one-window', 'two-by-two'],
    call: `limiter.consume(rule, identifiers) with ${store === 'redis' ? 'RedisStore' : 'MemoryStore'}`,
    async setup(options) {
      return deciderOn(
        store === 'redis' ? new RedisStore({ client: requireClient(options, this.id) }) : new MemoryStore(),
        algorithm,
        options,
      )
    },
  }
}

/**
 * RedisStore through node-redis rather than ioredis: the same Lua and keys, so what differs is
 * the client's own cost. Its client is its own, to the run's Redis, made with node-redis's
 * defaults as the run's ioredis client is with ioredis's.
 */
function tollgateNodeRedis(algorithm: AlgorithmName): Contender {
  return {
    id: `tollgate/node-redis/${algorithm}`,
    library: 'Tollgate',
    variant: `${algorithm} (RedisStore on node-redis)`,
    store: 'redis',
    ownClient: true,
    role: 'tollgate',
    shapes: ['one-window', 'two-by-two'],
    call: 'limiter.consume(rule, identifiers) with RedisStore on a node-redis client',
    async setup(options) {
      const { host, port } = requireClient(options, this.id).options
      // Loaded here, not with this module: every worker process loads the contenders, and
      // node-redis loaded in one that measures an in-process decision makes each decision cost
      // more instructions there.
      const { createClient } = await import('redis')
      const client = createClient({ socket: { host, port } })
      await client.connect()
      return deciderOn(new RedisStore({ client, closeClient: true }), algorithm, options)
    },
  }
}

/**
 * Decisions/s of HybridStore while it syncs with Redis each second. Callers that only await
 * decisions answered in the process never leave the microtask queue, where no timer runs: each
 * caller lets the event loop turn every TURN_EVERY decisions, as a server does between requests,
 * so that the sync runs beside the decisions and its cost counts in theirs.
 */
const TURN_EVERY = 256

function tollgateHybrid(algorithm: AlgorithmName): Contender {
  return {
    id: `tollgate/hybrid/${algorithm}`,
    library: 'Tollgate',
    variant: `${algorithm} (HybridStore)`,
    store: 'memory',
    syncsWithRedis: true,
    role: 'tollgate',
    shapes: ['one-window', 'two-by-two'],
    call: 'limiter.consume(rule, identifiers) with HybridStore, syncing with Redis each second',
    async setup(options) {
      const id = this.id
      const store = new HybridStore({ client: requireClient(options, id), prefix: `bench-hybrid:${process.pid}:` })
      const limiter = createLimiter({
        store,
        rules: { r: { algorithm, windows: windowsOf(options) } },
        onWarning: () => {},
      })
      let decided = 0
      return {
        async decide(identifiers) {
          if (++decided % TURN_EVERY === 0) await turn()
          const decision = await limiter.consume('r', identifiers)
          if (decision.error) throw decision.error
          return decision.allowed
        },
        async settle() {
          const report = await store.syncNow()
          if (report.error) throw report.error
        },
        async teardown() {
          const { mode } = store.stats()
          await limiter.close()
          if (mode !== 'synced') throw new Error(`${id}: the store stopped syncing (${mode})`)
        },
      }
    },
  }
}

export const tollgateContenders: readonly Contender[] = [
  ...(['redis', 'memory'] as const).flatMap((store) => ALGORITHMS.map((algorithm) => tollgate(store, algorithm))),
  ...ALGORITHMS.filter((algorithm) => algorithm !== 'sliding-log').map(tollgateHybrid),
  tollgateNodeRedis('fixed-window'),
]
