import { validatePrefix } from '../../rules/keys.js'

/**
 * The sorted set in which every HybridStore syncing under `prefix` says it is alive: one member
 * per process (its pid and a random suffix), scored with the time of its last sync in ms. Each
 * sync drops the members older than three of its own sync intervals, and the key expires after
 * that long, so what it holds is the processes that synced lately; strict mode's slices and the
 * `'local-share'` outage policy divide limits by their count.
 * @example await redis.zrange(hybridInstancesKey('tg:'), 0, -1, 'WITHSCORES')
 */
export function hybridInstancesKey(prefix = 'tg:'): string {
  return `${validatePrefix(prefix)}hybrid:instances`
}
