import { LiveRules } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { rules } from './rules.js'

/**
 * With Redis, the rules live there too: `rules.ts` holds the defaults, and a change published by
 * `pnpm rules publish …` reaches every process at once, without a restart. Without Redis there
 * is no fleet to share them with: the rules in code.
 */
export function liveRulesFrom(
  redis: Redis | undefined,
  {
    prefix = 'tg:',
    snapshotPath = process.env.TOLLGATE_RULES_SNAPSHOT,
  }: { prefix?: string; snapshotPath?: string } = {},
): LiveRules | undefined {
  if (redis === undefined) return undefined
  // With a snapshot, a process that starts while Redis is down runs the rules it last saw.
  return new LiveRules({ client: redis, defaults: rules, prefix, ...(snapshotPath ? { snapshotPath } : {}) })
}
