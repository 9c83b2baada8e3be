import { setImmediate } from 'node:timers'
import type { RedisConnection } from '../../redis-clients/connection.js'
import type { ReplyWatch } from '../store.js'

/**
 * One connection's commands on the wire and when it was last heard from. A store failure is
 * Redis's silence, not the process's own backlog: a burst of decisions queues behind itself, in
 * the process and in Redis, while every reply says Redis is working. So a decision's bound runs
 * on how long its connection has been silent, not on how long the decision has existed.
 */
export class ConnectionWatch implements ReplyWatch {
  private outstanding = 0
  /**
   * `performance.now()` of the last reply, or of the first turn of the event loop after a send
   * that ended a time with nothing outstanding; NaN until that turn.
   */
  private heardAt = 0

  sent(): void {
    if (this.outstanding++ > 0) return
    // Silence counts from the event loop's next turn, not from the send: a command handed to a
    // client that is still connecting goes out only once the process lets the connection
    // complete, and a process busy meanwhile is not Redis being silent.
    this.heardAt = Number.NaN
    setImmediate(this.startListening)
  }

  /** A reply or an error came back for one command sent. */
  heard(): void {
    if (this.outstanding > 0) this.outstanding--
    this.heardAt = performance.now()
  }

  silentMs(now: number): number {
    if (this.outstanding === 0 || Number.isNaN(this.heardAt)) return 0
    return now - this.heardAt
  }

  private readonly startListening = (): void => {
    if (Number.isNaN(this.heardAt)) this.heardAt = performance.now()
  }
}

/**
 * A store's watches: one for a standalone or Sentinel client (one connection), one per master on
 * a Cluster, so that a master that stopped answering is not hidden by the others' replies.
 */
export class ReplyWatches {
  private readonly single = new ConnectionWatch()
  private readonly byNode = new Map<string, ConnectionWatch>()

  constructor(private readonly connection: RedisConnection) {}

  /** The watch of the connection a command on `slot` goes to (any number off a Cluster). */
  of(slot: number): ConnectionWatch {
    if (!this.connection.cluster) return this.single
    // Before the Cluster's first slot map, or for a slot no master serves yet, commands wait in
    // the client: a watch of their own, for the slot.
    const node = this.connection.masterOfSlot(slot) ?? `slot ${slot}`
    let watch = this.byNode.get(node)
    if (watch === undefined) {
      watch = new ConnectionWatch()
      this.byNode.set(node, watch)
    }
    return watch
  }
}
