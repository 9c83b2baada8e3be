import { randomUUID } from 'node:crypto'
import { createLimiter, type Decision, RedisStore, type RulesOptions } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, inject, it } from 'vitest'

const rules = { api: { windows: [{ limit: 2, period: '200ms' }] } } satisfies RulesOptions

let client: Redis
beforeAll(() => {
  client = new Redis(inject('redisUrl'))
})
afterAll(async () => {
  await client.quit()
})

// Real time, on the Redis server's clock: what is asserted is the order and the spacing the
// store decided at, which hold however late the timers fire.
it('serves waits on a RedisStore first come first served, never more than the limit per period', async () => {
  const prefix = `redis-wait:${process.pid}:${randomUUID().slice(0, 8)}:`
  const limiter = createLimiter({ store: new RedisStore({ client, prefix }), rules })
  const allowed: number[] = []
  limiter.observe({
    timeEvery: 0,
    decided: (_, decision) => {
      if (decision.allowed) allowed.push(decision.nowMs)
    },
    storeFailed: () => {},
  })
  const served: Array<{ index: number; decision: Decision }> = []
  await Promise.all(
    Array.from({ length: 5 }, (_, index) =>
      limiter.wait('api', 'app:42').then((decision) => {
        served.push({ index, decision })
      }),
    ),
  )
  await limiter.close()
  expect(served.map(({ index }) => index)).toEqual([0, 1, 2, 3, 4])
  expect(served.every(({ decision }) => decision.allowed && decision.reason === 'ok')).toBe(true)
  const admittedAt = served.map(({ decision }) => decision.nowMs)
  for (let i = 2; i < admittedAt.length; i++) {
    expect((admittedAt[i] as number) - (admittedAt[i - 2] as number)).toBeGreaterThanOrEqual(200)
  }
  expect(Math.max(...admittedAt) - Math.min(...admittedAt)).toBeGreaterThanOrEqual(400)
  // Every consume the waits made: each wait charged once, the refused tries nothing.
  expect(allowed).toEqual(admittedAt)
})
