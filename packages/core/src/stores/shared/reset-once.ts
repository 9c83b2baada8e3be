import type { RedisConnection } from '../../redis-clients/connection.js'
import { resetScript } from '../../scripts/generated.js'
import type { StoreTarget } from '../store.js'
import { groupBySlot } from './cluster-slots.js'
import { operationKeyBeside } from './operations.js'

/** A reset's marks live at least this long: a slice reserved just before must find them at the next sync. */
const MIN_MARK_MS = 120_000

/**
 * Deletes the targets' keys once per call, however often the client sends it (lua/reset.lua): a
 * reset sent again after a lost reply would otherwise delete what was charged after it ran. Each
 * key gets a mark of when it was forgotten, at `time` (ms, or '-' for the server's TIME), kept
 * twice the targets' longest period, so that a strict store's slice reserved before is never
 * given back as capacity. One script call per Cluster slot (one for all elsewhere), each with an
 * operation's key in its slot.
 */
export function keysReset(
  connection: RedisConnection,
  prefix: string,
): (keys: readonly string[], targets: readonly StoreTarget[], time: string) => Promise<void> {
  const run = connection.script(resetScript)
  const { cluster } = connection
  return async (keys, targets, time) => {
    if (keys.length === 0) return
    let longest = 0
    for (const target of targets) for (const window of target.windows) longest = Math.max(longest, window.periodMs)
    const marksLive = String(Math.max(MIN_MARK_MS, 2 * longest))
    const slots = cluster ? groupBySlot(keys) : [keys.map((_, i) => i)]
    await Promise.all(
      slots.map((indices) => {
        const group = indices.map((i) => keys[i] as string)
        return run(group.length + 1, operationKeyBeside(prefix, group[0] as string), ...group, time, marksLive)
      }),
    )
  }
}
