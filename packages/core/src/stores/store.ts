import type { StoreWindowResult } from '../algorithms/window-result.js'
import type { RuleBlock } from '../rules/block.js'
import type { AlgorithmName, Window } from '../rules/rules.js'
import type { TollgateError } from '../support/errors.js'

/** One (rule, identifier) pair of a decision: its windows are checked and charged together. */
export interface StoreTarget {
  readonly rule: string
  readonly algorithm: AlgorithmName
  readonly windows: readonly Window[]
  readonly identifier: string
  /**
   * The rule's lockout, on a `consume` or `peek` that enforces it: a store that holds blocks
   * (`holdsBlocks`) refuses the decision while the identifier is blocked, and counts a refusal
   * by these windows toward the next block (algorithms/lockout.ts). Absent otherwise.
   */
  readonly block?: RuleBlock
}

/**
 * - `consume`: charge `cost` to every window of every target if all of them fit, else nothing.
 * - `peek`: the answer `consume` would give, charging nothing.
 * - `refund`: give `cost` units back to every window of every target.
 * - `charge`: charge `cost` to every window of every target whether it fits or not, always
 *   allowed: a reservation settled above its estimate (`limiter.reserve`). What passes a limit is
 *   debt, paid off as the window frees units (a bucket refills, a log's entries leave, a counter's
 *   window ends). Only a store with `chargesOverLimits` is asked for it.
 */
export type StoreOperation = 'consume' | 'peek' | 'refund' | 'charge'

/** The whole decision in one request, so that a store can make it atomically in one round trip. */
export interface StoreRequest {
  readonly operation: StoreOperation
  readonly targets: readonly StoreTarget[]
  readonly cost: number
  /**
   * The decision's one random number in [0, 1), for a `consume` or `peek` whose windows include
   * one with `lowBurst`; absent otherwise. A store that sheds refuses the decision when, for any
   * window, it is below that window's drop probability (`algorithms/shedding.ts`).
   */
  readonly random?: number
}

export type { StoreWindowResult }

export interface StoreResult {
  /** Whether every window fitted (and, for `consume`, was charged). Always true for `refund` and `charge`. */
  allowed: boolean
  /**
   * True when every window fitted but the request was shed; the windows that shed it answer a
   * `fitsAtMs` after now. Absent (or false) for any other answer.
   */
  shed?: boolean
  /**
   * True when a target's block refused the decision: one in force, or one this refusal started.
   * That target's window that started the block answers the block's end as its `fitsAtMs`.
   */
  blocked?: boolean
  /** The time the store decided at: its own clock, or the Redis server's. */
  nowMs: number
  /** One entry per window, targets in request order, windows in rule order. */
  windows: StoreWindowResult[]
  /**
   * For a `consume` that charged: takes back exactly that charge. The limiter calls it when the
   * answer came after the decision stopped waiting and refused (or decided locally) without it,
   * so that a refused request consumes nothing even then.
   */
  revert?: () => Promise<void>
  /**
   * Set by a store that decided without its shared state (a HybridStore whose syncs stopped
   * reaching Redis): `'local'` when it decided on this process's own count (the
   * decision's reason is then `'local-fallback'`), `'allow'` or `'deny'` when its policy lets
   * every request through or refuses it (reasons `store-error-allowed` / `store-error-denied`;
   * `windows` is then empty). `error` says why.
   */
  outage?: { policy: 'local' | 'allow' | 'deny'; error: TollgateError }
}

/** How long a connection to Redis has had commands outstanding without a reply. */
export interface ReplyWatch {
  /** Milliseconds since the connection last answered, while it has commands outstanding; 0 when it has none. `now` is `performance.now()`. */
  silentMs(now: number): number
}

/** Where a store delivers an answer by a call rather than a promise: RedisStore's and HybridStore's way with the limiter, and the deprecated `evaluateInto`'s. */
export interface StoreReceiver {
  answer(result: StoreResult): void
  fail(error: unknown): void
  /**
   * Called by a store when the request's command goes on the wire to the connection `watch`
   * follows (again for each further command the request needs). From then on the request's
   * bound runs on that connection's silence: time the request spent queued in the process, or
   * behind other commands that Redis is answering, is not Redis failing. A request no store
   * calls this for is bounded from the moment it was asked.
   */
  sent?(watch: ReplyWatch): void
}

/**
 * Where limiter state lives. A store receives a decision's every window, identifier and parent
 * at once and answers all or nothing, which a per-key `increment` interface could not promise.
 */
export interface Store {
  /**
   * The algorithms this store can decide, when not all of them: `createLimiter` refuses a rule
   * of any other with a `TollgateConfigError` naming the rule.
   */
  readonly supportedAlgorithms?: readonly AlgorithmName[]
  /**
   * Whether the store keeps blocks (a rule's `block`, StoreTarget.block): `createLimiter` refuses
   * a rule with `block` on a store without them, with a `TollgateConfigError` naming the rule.
   */
  readonly holdsBlocks?: boolean
  /**
   * Whether the store takes the `charge` operation, which `limiter.reserve` needs to settle a
   * cost above its estimate; `reserve` refuses (`TG_CONFIG`) on a store without it.
   */
  readonly chargesOverLimits?: boolean
  /**
   * A store decides two ways. This is the one every store has: the answer, by promise. A store
   * whose state is elsewhere (Redis) is asked here, bounded by `storeTimeoutMs` and watched by
   * the circuit breaker.
   */
  evaluate(request: StoreRequest): Promise<StoreResult>
  /**
   * The other, for stores that keep their state in the process: the same answer at once. When a
   * store has it, the limiter calls it instead of `evaluate`, with no timeout and no circuit
   * breaker: nothing in-process can stop answering, and the decision costs no timer and no
   * promise hop. `undefined`: this decision needs the shared store (a strict HybridStore whose
   * slices do not cover it); the limiter then asks `evaluate`, with the timeout and breaker.
   */
  evaluateSync?(request: StoreRequest): StoreResult | undefined
  /**
   * @deprecated Implement `evaluate` (and `evaluateSync` for an answer made in the process). Still
   * honoured: the answer `evaluate` would give, delivered to `receiver` exactly once, asked
   * instead of `evaluate` (after `evaluateSync` left the request undefined, when the store has
   * both). The receiver's methods never throw.
   */
  evaluateInto?(request: StoreRequest, receiver: StoreReceiver): void
  /**
   * The error the store's connection last reported since the store last answered, if any. A
   * failure that does not say why (a timeout, an open circuit breaker) names it, as its message's
   * end and, when it has no cause of its own, as its `cause`.
   */
  recentError?(): Error | undefined
  /**
   * For a store that makes round trips of its own on a schedule (a HybridStore's sync): reads
   * `key` on each of them, in the same round trip, and hands its value to `onValue`. Live rules
   * read their epoch so, instead of a poll of their own. The function returned stops it.
   */
  readOnEachSync?(key: string, onValue: (value: string | null) => void): () => void
  /** Forgets the state of exactly these targets; a rule's parents are among them only when the caller asks. */
  reset(targets: readonly StoreTarget[]): Promise<void>
  /** Releases timers and connections the store owns (never a client it was given). */
  close(): Promise<void>
}
