import { once } from 'node:events'
import { createLimiter, LiveRules, RedisStore, type RulesChange } from '@tollgate/core'
import calculateSlot from 'cluster-key-slot'
import { type Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULTS } from '../src/live-rules-fixtures.js'
import { ManualClock } from '../src/manual-clock.js'
import { pollUntil } from '../src/poll.js'
import {
  clusterClient,
  clusterMasters,
  type SpawnedCluster,
  spawnRedisCluster,
  waitReady,
} from '../src/redis-cluster.js'

const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 60_000)

describe('LiveRules on a Redis Cluster', () => {
  let cluster: SpawnedCluster
  let client: Cluster
  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3 })
    client = clusterClient(cluster)
    await waitReady(client)
  }, 60_000)
  afterAll(async () => {
    await client?.quit()
    await cluster?.stop()
  })

  it('publishes in one slot, nudges every process through the cluster, and decisions follow', async () => {
    const prefix = 'lrc:'
    const publisher = new LiveRules({ client, defaults: DEFAULTS, prefix, pollIntervalMs: 0, nudges: false })
    const listener = new LiveRules({ client, defaults: DEFAULTS, prefix, pollIntervalMs: 0 })
    const clock = new ManualClock(T0)
    const limiter = createLimiter({ rules: listener, store: new RedisStore({ client, clock: clock.now, prefix }) })
    try {
      const masters = await clusterMasters(cluster)
      await pollUntil('the listener subscribed on some node', 10_000, async () => {
        let count = 0
        for (const master of masters) {
          const node = new Redis(master.url)
          const [, subscribers] = (await node.pubsub('NUMSUB', `${prefix}{rules}:nudge`)) as [string, number]
          node.disconnect()
          count += subscribers
        }
        return count === 1 ? { done: true, value: count } : { done: false, state: `${count} subscribers` }
      })
      await listener.refresh()
      for (let i = 0; i < 2; i++) await limiter.consume('api', 'ip:1')

      const applied = once(limiter, 'rules') as Promise<[RulesChange]>
      expect(
        await publisher.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 3, period: '1m' }] } }),
      ).toEqual({
        epoch: 1,
      })
      expect((await applied)[0]).toEqual({ epoch: 1, changed: ['api'] })
      expect(await limiter.consume('api', 'ip:1')).toMatchObject({
        allowed: true,
        windows: [{ limit: 3, remaining: 0 }],
      })
      expect((await limiter.consume('api', 'ip:1')).allowed).toBe(false)

      // The keys the publish wrote, read from every master: in one slot, so on one of them.
      const written: string[] = []
      for (const master of masters) {
        const node = new Redis(master.url)
        written.push(...(await node.keys(`${prefix}{rules}:*`)))
        node.disconnect()
      }
      expect(written.sort()).toEqual(
        ['changed', 'current', 'epoch', 'history', 'ids'].map((name) => `${prefix}{rules}:${name}`),
      )
      expect(new Set(written.map((key) => calculateSlot(key))).size).toBe(1)
      expect(await client.get(listener.epochKey)).toBe('1')
      await publisher.rollback(0)
      await listener.refresh()
      expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(10)
    } finally {
      await limiter.close()
      await Promise.all([publisher.close(), listener.close()])
    }
  }, 60_000)
})
