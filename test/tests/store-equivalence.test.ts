import { ALGORITHMS, type Limiter, MemoryStore, RedisStore, createLimiter } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'

/** A small deterministic generator, so a failure replays exactly. */
function generator(seed: number) {
  let state = seed
  return (below: number) => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648
    return Math.floor((state / 2_147_483_648) * below)
  }
}

const IDENTIFIERS = ['ip:203.0.113.7', 'user:42', 'ip:2001:db8::/56']

describe('MemoryStore and RedisStore decide identically', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  it.each(ALGORITHMS)('%s, over 400 random operations', async (algorithm) => {
    const clock = new ManualClock(1_700_000_000_123)
    const rules = {
      child: {
        algorithm,
        windows: [
          { limit: 9, period: '2s' },
          { limit: 25, period: '15s' },
        ],
        parent: 'root',
      },
      root: { algorithm, windows: [{ limit: 40, period: '30s' }] },
    }
    const limiters: Limiter[] = [
      createLimiter({ store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), rules }),
      createLimiter({
        store: new RedisStore({ client, clock: clock.now, prefix: `equivalence:${process.pid}:${algorithm}:` }),
        rules,
      }),
    ]
    const random = generator(ALGORITHMS.indexOf(algorithm) + 1)
    for (let step = 0; step < 400; step++) {
      const jump = random(20) === 0 ? 40_000 : random(900)
      clock.advance(jump)
      const rule = random(4) === 0 ? 'root' : 'child'
      const ids = IDENTIFIERS.filter(() => random(2) === 0)
      if (ids.length === 0) ids.push(IDENTIFIERS[random(3)] as string)
      const cost = random(10) === 0 ? 0 : 1 + random(4)
      const operation = (['consume', 'consume', 'consume', 'peek', 'refund', 'reset'] as const)[random(6)]
      if (operation === 'reset') {
        await Promise.all(limiters.map((limiter) => limiter.reset(rule, ids)))
        continue
      }
      const [local, redis] = await Promise.all(limiters.map((limiter) => limiter[operation](rule, ids, { cost })))
      expect(redis, `step ${step}: ${operation} ${rule} ${ids.join(',')} cost ${cost}`).toEqual(local)
    }
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })
})
