import type { Redis } from 'ioredis'

export type StoreKind = 'redis' | 'memory'

/** `one-window`: N per period for one identifier. `two-by-two`: two windows for each of two identifiers, one decision. */
export type RuleShape = 'one-window' | 'two-by-two'

/** Tollgate is measured; incumbents are what it is measured against; the ceiling bounds what any Redis limiter can do. */
export type Role = 'tollgate' | 'incumbent' | 'ceiling'

export interface SetupOptions {
  /**
   * The run's shared ioredis client, made with ioredis' defaults (`new Redis(url)`) for every
   * contender alike; undefined for memory stores. Contenders never close it.
   */
  client: Redis | undefined
  shape: RuleShape
  /** The limit of the rule's (first) window. */
  limit: number
  periodMs: number
}

export interface Decider {
  /**
   * Makes one decision. Resolves whether it was admitted; rejects when the limiter could not
   * decide (a store error, or a decision Tollgate took by its failure policy).
   * `identifiers` has one element for `one-window` and two for `two-by-two`.
   */
  decide(identifiers: readonly string[]): Promise<boolean>
  /**
   * Brings to an end the work it does beside its decisions, if any (a HybridStore's sync of what
   * was just decided), so that none of it runs while another contender is measured: a sync of
   * 20,000 keys takes Redis about 200 ms.
   */
  settle?(): Promise<void>
  teardown(): Promise<void>
}

export interface Contender {
  /** Stable and unique: names the contender to worker processes and in raw results. */
  id: string
  /** The package, as the report names it. */
  library: string
  /** The variant: Tollgate's algorithm, or the incumbent's store class. */
  variant: string
  store: StoreKind
  /** Decides in memory but syncs with Redis (HybridStore): it gets the run's client all the same. */
  syncsWithRedis?: boolean
  /** Talks to Redis through a client of its own, not the run's ioredis client, which counts what a contender sends. */
  ownClient?: boolean
  role: Role
  shapes: readonly RuleShape[]
  /** What one decision calls, as the report says it. */
  call: string
  setup(options: SetupOptions): Promise<Decider>
}

export function labelOf(contender: Contender): string {
  return `${contender.library} ${contender.variant}`
}

export function requireClient(options: SetupOptions, id: string): Redis {
  if (!options.client) throw new Error(`${id} needs a Redis client`)
  return options.client
}
