import type { Check } from './check.js'
import { nodesOf } from './check.js'

/** What each Redis version gives Tollgate: below the first the scripts fail, below the second it works but is not advised. */
const REQUIRED = [6, 0] as const
const ADVISED = [6, 2] as const

export const version: Check = {
  name: 'version',
  async run(connection) {
    const versions = await Promise.all(
      nodesOf(connection).map(
        async (node) => /^redis_version:(\S+)/m.exec(await node.info('server'))?.[1] ?? 'unknown',
      ),
    )
    const oldest = versions.map(parsed).sort(compare)[0] as number[]
    const shown = [...new Set(versions)].join(', ')
    const details = { versions }
    if (oldest.length === 0 || compare(oldest, [...REQUIRED]) < 0) {
      return {
        status: 'fail',
        message: `Redis ${shown}: Tollgate needs 6.0 or later (its scripts write with SET … KEEPTTL, new in 6.0); RedisStore, HybridStore and LiveRules all fail below it`,
        details,
      }
    }
    if (compare(oldest, [...ADVISED]) < 0) {
      return {
        status: 'warn',
        message: `Redis ${shown}: the scripts run on it (they need 6.0 for SET … KEEPTTL), but 6.0 no longer gets fixes upstream; use 6.2 or later`,
        details,
      }
    }
    return { status: 'ok', message: `Redis ${shown}`, details }
  },
}

function parsed(text: string): number[] {
  return /^\d+(\.\d+)*$/.test(text) ? text.split('.').map(Number) : []
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const difference = (a[i] ?? 0) - (b[i] ?? 0)
    if (difference !== 0) return difference
  }
  return 0
}
