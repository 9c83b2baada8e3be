import type { AddressInfo } from 'node:net'
import { createLimiter, HybridStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, inject, it } from 'vitest'
import '@tollgate/test-support/provided-context'
import { createApp } from '../src/app.js'
import { rules } from '../src/rules.js'
import { storeFrom } from '../src/store.js'

// Two app processes on one Redis, each deciding in memory; time stands still, syncs are explicit.
const T0 = 1_763_712_000_000
let client: Redis
const apps: Array<{ base: string; store: HybridStore; close: () => Promise<void> }> = []

beforeAll(async () => {
  client = new Redis(inject('redisUrl'))
  const prefix = `example-hybrid-${process.pid}:`
  for (let i = 0; i < 2; i++) {
    const store = new HybridStore({ client, prefix, clock: () => T0, autoSync: false })
    const limiter = createLimiter({ store, rules })
    const server = createApp({ limiter })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    apps.push({
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      store,
      close: async () => {
        await new Promise((resolve) => server.close(resolve))
        await limiter.close()
      },
    })
  }
})
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()))
  await client.quit()
})

it('shares the limit between two processes once they have synced', async () => {
  const [first, second] = apps as [(typeof apps)[0], (typeof apps)[0]]
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch(`${first.base}/items`)).status)
  // The second has not heard of those three yet: it decides on its own count.
  statuses.push((await fetch(`${second.base}/items`)).status)
  for (const app of apps) await app.store.syncNow()
  await second.store.syncNow()
  statuses.push((await fetch(`${second.base}/items`)).status)
  const refused = await fetch(`${second.base}/items`)
  statuses.push(refused.status)
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  expect(refused.headers.get('retry-after')).toBe('10')
})

it('in strict mode, two processes never pass the limit between them, with no sync at all', async () => {
  const prefix = `example-strict-${process.pid}:`
  const servers = []
  for (let i = 0; i < 2; i++) {
    const store = new HybridStore({ client, prefix, clock: () => T0, autoSync: false, consistency: 'strict' })
    const limiter = createLimiter({ store, rules })
    const server = createApp({ limiter })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    servers.push({ server, limiter, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
  }
  const statuses = []
  for (let i = 0; i < 8; i++) statuses.push((await fetch(`${servers[i % 2]?.base}/items`)).status)
  expect(statuses.filter((status) => status === 200)).toHaveLength(5)
  for (const { server, limiter } of servers) {
    await new Promise((resolve) => server.close(resolve))
    await limiter.close()
  }
})

it('picks the store from TOLLGATE_STORE, and says hybrid needs Redis', async () => {
  expect(storeFrom(undefined, undefined)).toBeUndefined()
  expect(() => storeFrom(undefined, 'hybrid')).toThrow('TOLLGATE_STORE=hybrid needs REDIS_URL')
  expect(() => storeFrom(undefined, 'hybrid-strict')).toThrow('TOLLGATE_STORE=hybrid-strict needs REDIS_URL')
  const strict = storeFrom(client, 'hybrid-strict')
  expect(strict?.supportedAlgorithms).toEqual(['fixed-window', 'sliding-window'])
  await strict?.close()
  const hybrid = storeFrom(client, 'hybrid')
  expect(hybrid).toBeInstanceOf(HybridStore)
  await hybrid?.close()
  expect(storeFrom(client, undefined)?.constructor.name).toBe('RedisStore')
})
