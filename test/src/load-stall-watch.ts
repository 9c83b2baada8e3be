import { setTimeout as delay } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { type LoadReport, loopBlockedWithin } from './load-driver.js'
import { HOST } from './redis-host.js'

/** One PING on the watch's own connection; times on the caller's clock. */
export interface PingSample {
  startMs: number
  endMs: number
  /** False when it failed, including when it took longer than the watch's command timeout. */
  ok: boolean
}

export interface StallWatch {
  readonly pings: readonly PingSample[]
  /**
   * The slowest PING in flight at any time within [fromMs, toMs], in milliseconds, whether it was
   * answered or timed out; 0 if none. A long one means that the server, or this process's event
   * loop, stalled then.
   */
  slowestPingWithin(fromMs: number, toMs: number): number
  stop(): Promise<void>
}

const PAUSE_MS = 5
// Bounds stop(): a PING to a paused server would otherwise wait until it runs again.
const COMMAND_TIMEOUT_MS = 1_000
const RECONNECT_MS = 20

/**
 * PINGs the node on a connection of its own, one PING at a time, until stopped. A decision that
 * times out while a PING to the same node was just as slow was held up by a stall of the machine
 * (Redis not scheduled, or the event loop blocked so that timers fire before replies are read),
 * not by anything the limiter or the topology did: on a small shared box such stalls happen.
 */
export function watchStalls(port: number, now: () => number): StallWatch {
  const client = new Redis({
    host: HOST,
    port,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    // Back soon after a restarted node is, so that the time right after an outage is watched too.
    retryStrategy: () => RECONNECT_MS,
  })
  // Failed PINGs are recorded; a node that is down is expected during an outage.
  client.on('error', () => {})
  const pings: PingSample[] = []
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const startMs = now()
      const ok = await client.ping().then(
        () => true,
        () => false,
      )
      pings.push({ startMs, endMs: now(), ok })
      await delay(PAUSE_MS)
    }
  })()
  return {
    pings,
    slowestPingWithin(fromMs, toMs) {
      let slowest = 0
      for (const ping of pings) {
        if (ping.startMs <= toMs && ping.endMs >= fromMs) slowest = Math.max(slowest, ping.endMs - ping.startMs)
      }
      return slowest
    },
    async stop() {
      stopped = true
      await loop
      client.disconnect()
    },
  }
}

/** A store failure as the limiter's `store-error` event reported it, on the load's clock. */
export interface StoreErrorRecord {
  atMs: number
  message: string
}

const TIMEOUT_MESSAGE = /did not answer within/

/**
 * The store errors a stall does not explain: every error other than a timeout, and each timeout
 * during whose wait neither a PING to the node took, nor the event loop was blocked for, half the
 * timeout. (PINGs alone miss a blocked event loop that falls between two of them.)
 */
export function unexplainedByStalls(
  errors: readonly StoreErrorRecord[],
  watch: StallWatch,
  report: LoadReport,
  timeoutMs: number,
): StoreErrorRecord[] {
  return errors.filter((error) => {
    if (!TIMEOUT_MESSAGE.test(error.message)) return true
    const from = error.atMs - timeoutMs
    const stalled = Math.max(watch.slowestPingWithin(from, error.atMs), loopBlockedWithin(report, from, error.atMs))
    return stalled < timeoutMs / 2
  })
}
