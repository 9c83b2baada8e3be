import calculateSlot from 'cluster-key-slot'
import type { ScriptCommand } from '../../redis-clients/connection.js'
import { KeyBuilder } from '../../rules/keys.js'
import { decideScript } from '../../scripts/generated.js'
import { type Clock, timeFrom } from '../../support/clock.js'
import { describeValue, TollgateError } from '../../support/errors.js'
import { ANSWERS_INTO } from '../shared/answers-into.js'
import { Batches } from '../shared/batches.js'
import { ClientErrors } from '../shared/client-errors.js'
import { decideAcrossSlots, groupBySlot, type RunOnSlot } from '../shared/cluster-slots.js'
import { operationKey } from '../shared/operations.js'
import {
  type DecodedReply,
  decisionFailure,
  decodeReply,
  hasBlock,
  isDecisionError,
  randomArgument,
  replyWidth,
  ScriptArguments,
} from '../shared/redis-wire.js'
import { ReplyWatches } from '../shared/reply-watch.js'
import { keysReset } from '../shared/reset-once.js'
import type {
  Store,
  StoreOperation,
  StoreReceiver,
  StoreRequest,
  StoreResult,
  StoreTarget,
  StoreWindowResult,
} from '../store.js'
import { type RedisStoreOptions, redisConfigOf } from './options.js'
import { RefusalCache } from './refusal-cache.js'

/**
 * Decisions per script call. A batch holds Redis for about its size times one decision's
 * script time, so this bounds what one batch adds to other clients' latency. It also lets the
 * two sides overlap: while Redis runs one batch, the process settles the last one and prepares
 * the next; larger batches kept the process and Redis waiting on each other in turn
 * (bench/README.md).
 */
const MAX_BATCH = 128

interface QueuedRun {
  operation: StoreOperation | 'undo'
  keys: readonly string[]
  targets: readonly StoreTarget[]
  cost: number
  /** Milliseconds, or '-' for the server's TIME. */
  time: string
  /** The decision's random number, when it may shed. */
  random: number | undefined
  revertable: boolean
  receiver: StoreReceiver
  /** The refusal cache's mark when the decision was asked: a refusal after a refund or reset meanwhile is not kept. */
  mark: number
  /** For a refund or an undo: the key that makes it apply once, sent before the targets' keys. */
  operationKey: string | undefined
}

/**
 * Redis through ioredis: each decision, refund or peek is decided in one round trip. The
 * decisions a process makes in the same turn of its event loop travel together, as one EVALSHA of at most
 * MAX_BATCH decisions (per slot on a Cluster): one socket write and one script call for all of
 * them, each still decided atomically on its own, in call order, and one failing on a bad key
 * fails alone (its error has `storeDown: false`, so the limiter's circuit breaker ignores it).
 * A lone decision is sent at the end of the turn, never held for a timer.
 *
 * On a Cluster, an identifier's keys share its hash tag, so a decision for one identifier is one
 * script on one slot. A consume whose identifiers hash to several slots charges them one after
 * another in ascending slot order, each atomically; at the first slot that refuses it stops,
 * undoes the charges of the slots before it, and peeks at the slots after it for their windows.
 * A slot thus only sees consumes that every lower slot admitted, and concurrent consumes of the
 * same identifiers are admitted exactly up to the limit. The price is a round trip per extra
 * slot, and units left charged until they expire if the process dies between a charge and its
 * undo. Decisions that share only some identifiers can still be refused on units held for one
 * that a later slot then refuses (see docs/production.md). A peek or a refund asks every slot
 * at once.
 */
export class RedisStore implements Store {
  readonly holdsBlocks = true
  readonly chargesOverLimits = true
  private readonly cluster: boolean
  private readonly keys: KeyBuilder
  private readonly clock: Clock | undefined
  private readonly runScript: ScriptCommand
  private readonly scriptArguments = new ScriptArguments()
  private readonly batches: Batches<QueuedRun>
  private readonly errors: ClientErrors
  private readonly resetKeys: ReturnType<typeof keysReset>
  private readonly watches: ReplyWatches
  private readonly refusals: RefusalCache | undefined
  /**
   * A refusal Redis answered before, at once: undefined when there is none and the decision goes
   * to Redis. Absent when `refusalCache` is false.
   */
  readonly evaluateSync?: (request: StoreRequest) => StoreResult | undefined
  private readonly closeClient: (() => Promise<void>) | undefined
  private closed = false

  constructor(options: RedisStoreOptions) {
    const { connection, prefix, clock, closeClient, refusalCache } = redisConfigOf(options)
    this.closeClient = closeClient
    this.cluster = connection.cluster
    this.watches = new ReplyWatches(connection)
    if (refusalCache !== undefined) {
      const refusals = new RefusalCache(refusalCache.maxEntries, refusalCache.maxHoldMs)
      this.refusals = refusals
      this.evaluateSync = (request) => {
        if (request.operation === 'refund' || request.operation === 'charge' || refusals.size === 0) return undefined
        return refusals.find(request.targets, request.cost, this.refusalTime())
      }
    }
    this.keys = new KeyBuilder(prefix)
    this.clock = clock
    this.runScript = connection.script(decideScript)
    this.resetKeys = keysReset(connection, this.keys.prefix)
    this.batches = new Batches(MAX_BATCH, (group, runs) => this.send(group, runs))
    this.errors = ClientErrors.of(connection)
  }

  /** The key that holds a target's state: useful to inspect it with redis-cli. */
  keyOf(target: StoreTarget): string {
    return this.keys.key(target.rule, target.algorithm, target.identifier)
  }

  evaluate(request: StoreRequest): Promise<StoreResult> {
    let refused: StoreResult | undefined
    try {
      refused = this.evaluateSync?.(request)
    } catch (error) {
      return Promise.reject(error)
    }
    if (refused !== undefined) return Promise.resolve(refused)
    return new Promise((resolve, reject) => this[ANSWERS_INTO](request, { answer: resolve, fail: reject }))
  }

  /** @deprecated The limiter answers through the store's receiver itself; call `evaluate`. */
  evaluateInto(request: StoreRequest, receiver: StoreReceiver): void {
    this[ANSWERS_INTO](request, receiver)
  }

  /** @internal How the limiter is answered: one call per decision of a batch (stores/shared/answers-into.ts). */
  [ANSWERS_INTO](request: StoreRequest, receiver: StoreReceiver): void {
    const { operation, targets, cost, random } = request
    const keys = this.keysOf(targets)
    const { refusals } = this
    if (refusals !== undefined && operation === 'refund') refusals.forget(targets)
    const mark = refusals === undefined ? 0 : refusals.mark
    let time = '-'
    if (this.clock) {
      try {
        time = String(timeFrom(this.clock, 'RedisStore'))
      } catch (error) {
        receiver.fail(error)
        return
      }
    }
    if (this.cluster) {
      const slots = groupBySlot(keys)
      if (slots.length > 1) {
        const askedAt = time === '-' ? performance.now() : Number(time)
        decideAcrossSlots(request, keys, slots, time, this.runOnSlot, receiver).then(
          (result) => {
            if (operation !== 'refund') refusals?.remember(targets, cost, result, askedAt, mark)
            receiver.answer(result)
          },
          (error: unknown) => receiver.fail(error),
        )
        return
      }
    }
    this.enqueue(operation, keys, targets, cost, time, random, true, receiver, mark)
  }

  async reset(targets: readonly StoreTarget[]): Promise<void> {
    if (targets.length === 0) return
    // A reset lifts a block too: its key sits beside the state's (lua/lib/lockout.lua).
    const keys = this.keysOf(targets).flatMap((key) => [key, `${key}:block`])
    this.refusals?.forget(targets)
    await this.resetKeys(keys, targets, this.clock ? String(timeFrom(this.clock, 'RedisStore')) : '-')
    this.errors.answered()
  }

  /**
   * The refusal cache's time: the store's clock when it has one, on which Redis decides too;
   * else the monotonic clock, from which refusals are measured as they are sent.
   */
  private refusalTime(): number {
    return this.clock ? timeFrom(this.clock, 'RedisStore') : performance.now()
  }

  private keysOf(targets: readonly StoreTarget[]): string[] {
    const keys: string[] = new Array(targets.length)
    for (let t = 0; t < targets.length; t++) keys[t] = this.keyOf(targets[t] as StoreTarget)
    return keys
  }

  recentError(): Error | undefined {
    return this.errors.recent
  }

  /** Stops listening to the client's errors; the client stays open unless `closeClient` is true. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true
      this.errors.release()
    }
    return this.closeClient?.() ?? Promise.resolve()
  }

  /**
   * Queues one script run, all its keys in one slot, for the next batch of that slot: a part of
   * a decision split over slots, or an undo. Such a part is never `revertable` on its own: it is
   * reverted with the whole decision.
   */
  private readonly runOnSlot: RunOnSlot = (operation, keys, targets, cost, time, random, asker) =>
    new Promise<StoreResult>((resolve, reject) => {
      const receiver: StoreReceiver = { answer: resolve, fail: reject }
      const sent = asker?.sent?.bind(asker)
      if (sent !== undefined) receiver.sent = sent
      // An undo gives units back, as a refund does.
      if (operation === 'undo') this.refusals?.forget(targets)
      this.enqueue(operation, keys, targets, cost, time, random, false, receiver, 0)
    })

  /**
   * Queues one script run, all its keys in one slot, for the next batch of that slot; a run that
   * gives units back (a refund, an undo) goes with an operation's key, so that it applies once.
   */
  private enqueue(
    operation: StoreOperation | 'undo',
    keys: readonly string[],
    targets: readonly StoreTarget[],
    cost: number,
    time: string,
    random: number | undefined,
    revertable: boolean,
    receiver: StoreReceiver,
    mark: number,
  ): void {
    // A Cluster runs a script on one slot only; elsewhere every run fits in one batch.
    const group = this.cluster ? calculateSlot(keys[0] as string) : 0
    // Writes that must not apply twice when the client sends them again: refunds, undos, charges.
    const appliesOnce = operation === 'refund' || operation === 'undo' || operation === 'charge'
    const once = appliesOnce ? operationKey(this.keys.prefix, (targets[0] as StoreTarget).identifier) : undefined
    this.batches.add(group, {
      operation,
      keys,
      targets,
      cost,
      time,
      random,
      revertable,
      receiver,
      mark,
      operationKey: once,
    })
  }

  private send(group: number, runs: readonly QueuedRun[]): void {
    const keysAndArgs: string[] = []
    for (const run of runs) {
      if (run.operationKey !== undefined) keysAndArgs.push(run.operationKey)
      const { keys, targets } = run
      for (let t = 0; t < keys.length; t++) {
        const key = keys[t] as string
        keysAndArgs.push(key)
        // A block's key follows its target's (lua/decide.lua), in the same slot: the same hash tag.
        if ((targets[t] as StoreTarget).block !== undefined) keysAndArgs.push(`${key}:block`)
      }
    }
    const keyCount = keysAndArgs.length
    for (const run of runs) {
      const once = run.operationKey !== undefined
      keysAndArgs.push(this.scriptArguments.of(run.operation, run.cost, run.time, run.random, run.targets, once))
      if (run.random !== undefined) keysAndArgs.push(randomArgument(run.random))
    }
    let reply: Promise<unknown>
    try {
      reply = this.runScript(keyCount, ...keysAndArgs)
    } catch (error) {
      for (const run of runs) run.receiver.fail(error)
      return
    }
    const sentAt = performance.now()
    const watch = this.watches.of(group)
    watch.sent()
    for (const run of runs) run.receiver.sent?.(watch)
    reply.then(
      (replies) => {
        watch.heard()
        this.errors.answered()
        // One flat array: per run, its numbers, or one string for the error that failed it alone.
        let at = 0
        let i = 0
        if (Array.isArray(replies)) {
          for (; i < runs.length; i++) {
            const run = runs[i] as QueuedRun
            const first: unknown = replies[at]
            if (isDecisionError(first)) {
              run.receiver.fail(decisionFailure(run.keys, String(first)))
              at += 1
              continue
            }
            const width = replyWidth(run.targets, run.random)
            if (at + width > replies.length) break
            this.deliver(run, replies, at, width, sentAt)
            at += width
          }
        }
        if (!Array.isArray(replies) || i < runs.length || at !== replies.length) {
          const error = new TollgateError(
            'TG_STORE',
            `unexpected reply from the decide script: ${describeValue(replies)}`,
          )
          for (; i < runs.length; i++) (runs[i] as QueuedRun).receiver.fail(error)
        }
      },
      (error: unknown) => {
        watch.heard()
        for (const run of runs) run.receiver.fail(error)
      },
    )
  }

  /** A charged run's undo, one function for every ChargedResult rather than a closure each. */
  private readonly undoRun = (run: QueuedRun, nowMs: number) => this.undo(run.keys, run.targets, run.cost, nowMs)

  /** Takes back a consume charged at `nowMs` (the time its script ran) on these keys. */
  private async undo(
    keys: readonly string[],
    targets: readonly StoreTarget[],
    cost: number,
    nowMs: number,
  ): Promise<void> {
    await this.runOnSlot('undo', keys, targets, cost, String(nowMs), undefined)
  }

  /** What a run's answer tells the refusal cache: a refusal to keep, or keys whose numbers moved. */
  private noteForRefusals(refusals: RefusalCache, run: QueuedRun, decoded: DecodedReply, sentAt: number): void {
    if (decoded.allowed) {
      if (run.operation === 'consume' && run.cost > 0) refusals.charged(run.targets)
      return
    }
    // A part of a decision split over slots is kept with the whole decision, if at all.
    if (!run.revertable || run.operation === 'refund') return
    // On the store's clock, the request went out at the time it carries.
    const at = run.time === '-' ? sentAt : Number(run.time)
    refusals.remember(run.targets, run.cost, decoded, at, run.mark)
  }

  /** Resolves a run with its part of the reply, `replies[at]` onwards; `sentAt` when its batch left. */
  private deliver(run: QueuedRun, replies: readonly unknown[], at: number, width: number, sentAt: number): void {
    const decoded = decodeReply(replies, at, width, run.random, hasBlock(run.targets))
    if (this.refusals !== undefined) this.noteForRefusals(this.refusals, run, decoded, sentAt)
    run.receiver.answer(
      run.revertable && run.operation === 'consume' && decoded.allowed && run.cost > 0
        ? new ChargedResult(decoded.nowMs, decoded.windows, run, this.undoRun)
        : decoded,
    )
  }
}

/** The answer to a consume that charged: it can take exactly that charge back. */
class ChargedResult implements StoreResult {
  readonly allowed = true

  constructor(
    readonly nowMs: number,
    readonly windows: StoreWindowResult[],
    private readonly run: QueuedRun,
    private readonly undoRun: (run: QueuedRun, nowMs: number) => Promise<void>,
  ) {}

  revert(): Promise<void> {
    return this.undoRun(this.run, this.nowMs)
  }
}
