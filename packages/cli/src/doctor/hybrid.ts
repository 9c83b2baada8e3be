import { hybridInstancesKey } from '@tollgate/core'
import { span } from '../format.js'
import type { Check } from './check.js'

/** The processes whose HybridStore synced lately under the prefix: the heartbeat set they share. */
export const hybrid: Check = {
  name: 'hybrid',
  async run(connection, session) {
    const key = hybridInstancesKey(session.options.prefix)
    const { client } = connection
    const [entries, [seconds, micros]] = await Promise.all([client.zrange(key, 0, -1, 'WITHSCORES'), client.time()])
    const nowMs = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000)
    const instances: Array<{ id: string; lastSyncAtMs: number; ageMs: number }> = []
    for (let i = 0; i + 1 < entries.length; i += 2) {
      const lastSyncAtMs = Number(entries[i + 1])
      instances.push({ id: entries[i] as string, lastSyncAtMs, ageMs: nowMs - lastSyncAtMs })
    }
    const details = { key, instances }
    if (instances.length === 0) {
      return {
        status: 'ok',
        message: `no HybridStore process syncing under ${JSON.stringify(session.options.prefix)}`,
        details,
      }
    }
    const newest = Math.min(...instances.map((i) => i.ageMs))
    const oldest = Math.max(...instances.map((i) => i.ageMs))
    const ages =
      instances.length === 1
        ? span(Math.max(0, newest))
        : `${span(Math.max(0, newest))} to ${span(Math.max(0, oldest))}`
    return {
      status: 'ok',
      message: `${instances.length} HybridStore process${instances.length === 1 ? '' : 'es'} alive (last synced ${ages} ago)`,
      details,
    }
  },
}
