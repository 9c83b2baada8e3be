import { resendAsItWas } from '../shared/operations.js'
import { pendingUnits } from './bucket-fold.js'
import type { Shape } from './key-table.js'
import { chunkArguments, readChunkReply, SyncEntries } from './sync-wire.js'

/** What a PushedAlone needs of its HybridStore. */
export interface PushedAloneContext {
  /** Runs the sync script. */
  send(keyCount: number, keysAndArgs: string[]): Promise<unknown>
  operationKey(key: string): string
  /** Units Redis refused (it ran nothing): back to the key's pending ones, if the row still holds it, else lost. */
  putBack(row: number, generation: number, units: readonly number[]): void
  overAdmitted(rule: string, units: number): void
}

interface AlonePush {
  row: number
  generation: number
  rule: string
  keys: string[]
  keyCount: number
  keysAndArgs: string[]
  units: readonly number[]
  since: number
}

/**
 * Units pushed at once, alone, outside a sync: those a key held when its rule's limits changed (a
 * live publish, another limiter's rule of the same shape), pushed under the limits they were
 * admitted under, so that Redis counts what passed a limit against the limit in force then
 * (pushed with the next sync under the new limits, a limit lowered from 600 to 50 per minute once
 * reported 96 units admitted under 600 as over-admitted); and those of a key a full table forgets
 * to make room, which would otherwise be lost with it. Sent before the next sync on the same
 * connection, they reach the key before that sync reads it. A push whose call failed without an
 * answer is sent again as it was with the next sync, under the same operation key.
 */
export class PushedAlone {
  private readonly doubtful: AlonePush[] = []
  private overAdmittedSince = 0
  private pushedSince = 0

  /** `maxDoubtful`: pushes kept to be sent again at most; past it, a failed push's units are lost (`putBack`). */
  constructor(
    private readonly maxDoubtful: number,
    private readonly context: PushedAloneContext,
  ) {}

  push(row: number, generation: number, key: string, shape: Shape, units: readonly number[], time: string): void {
    const entries = new SyncEntries()
    entries.add(shape.algorithm, shape.windows, units)
    const { keyCount, keysAndArgs } = chunkArguments(
      entries.entries,
      [key],
      time,
      undefined,
      this.context.operationKey(key),
    )
    void this.send({
      row,
      generation,
      rule: shape.rule,
      keys: [key],
      keyCount,
      keysAndArgs,
      units,
      since: performance.now(),
    })
  }

  /** Sends again the pushes whose calls failed without an answer; each settles without rejecting. */
  resendDoubtful(): Array<Promise<void>> {
    return this.doubtful.splice(0).map((push) => this.send(push))
  }

  /** Units pushed and pushed above a limit since the last call: the next sync reports them. */
  takeCounts(): { pushedUnits: number; overAdmitted: number } {
    const counts = { pushedUnits: this.pushedSince, overAdmitted: this.overAdmittedSince }
    this.pushedSince = 0
    this.overAdmittedSince = 0
    return counts
  }

  private async send(push: AlonePush): Promise<void> {
    let reply: unknown
    try {
      reply = await this.context.send(push.keyCount, push.keysAndArgs)
    } catch (error) {
      if (resendAsItWas(error, push.since) && this.doubtful.length < this.maxDoubtful) this.doubtful.push(push)
      else this.context.putBack(push.row, push.generation, push.units)
      return
    }
    let answer: ReturnType<typeof readChunkReply>
    try {
      answer = readChunkReply(reply, push.keys)
    } catch {
      // A reply that does not parse: Redis ran the push, only what it said is lost.
      return
    }
    const value = answer.values[0]
    if (value instanceof Error) return
    // Its slot moved as the push went: nothing was written, the units go with the next sync.
    if (typeof value !== 'string' && !value?.pushed) {
      this.context.putBack(push.row, push.generation, push.units)
      return
    }
    const overAdmitted = answer.overAdmitted?.get(0) ?? 0
    this.pushedSince += pendingUnits(push.units)
    this.overAdmittedSince += overAdmitted
    if (overAdmitted > 0) this.context.overAdmitted(push.rule, overAdmitted)
  }
}
