import type { AddressInfo } from 'node:net'
import { createLimiter, type LiveRules, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, inject, it } from 'vitest'
import '@tollgate/test-support/provided-context'
import { createApp } from '../src/app.js'
import { liveRulesFrom } from '../src/live-rules.js'
import { rulesCommand } from '../src/rules-command.js'

// Two app processes on one Redis with live rules, and `pnpm rules …` changing them; time stands still.
const T0 = 1_763_712_000_000
const prefix = `example-live-${process.pid}:`
let client: Redis
const apps: Array<{ base: string; live: LiveRules; close: () => Promise<void> }> = []

beforeAll(async () => {
  client = new Redis(inject('redisUrl'))
  for (let i = 0; i < 2; i++) {
    const live = liveRulesFrom(client, { prefix }) as LiveRules
    const limiter = createLimiter({ rules: live, store: new RedisStore({ client, prefix, clock: () => T0 }) })
    const server = createApp({ limiter })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    apps.push({
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      live,
      close: async () => {
        await new Promise((resolve) => server.close(resolve))
        await limiter.close()
        await live.close()
      },
    })
  }
})
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()))
  // The rules' keys are configuration, kept without a TTL: this test's go with it.
  const keys = ['epoch', 'current', 'changed', 'history', 'ids'].map((name) => `${prefix}{rules}:${name}`)
  await client.del(...keys)
  await client.quit()
})

const statuses = async (base: string, count: number) => {
  const seen: number[] = []
  for (let i = 0; i < count; i++) seen.push((await fetch(`${base}/items`)).status)
  return seen
}

it('raises the limit of every process with `pnpm rules publish`, refuses an invalid rule, and rolls back', async () => {
  const [first, second] = apps as [(typeof apps)[0], (typeof apps)[0]]
  expect(await statuses(first.base, 6)).toEqual([200, 200, 200, 200, 200, 429])

  const raised = '{"api":{"algorithm":"fixed-window","windows":[{"limit":8,"period":"10s"}]}}'
  expect(await rulesCommand(client, ['publish', raised], prefix)).toBe('published epoch 1')
  await Promise.all(apps.map((app) => app.live.refresh()))
  // The five counted so far stay counted under the new limit.
  expect(await statuses(second.base, 4)).toEqual([200, 200, 200, 429])

  await expect(
    rulesCommand(client, ['publish', '{"api":{"windows":[{"limit":0,"period":"10s"}]}}'], prefix),
  ).rejects.toMatchObject({
    code: 'TG_CONFIG',
    message: "rule 'api', window 0: limit must be a positive integer, got 0",
  })

  expect(await rulesCommand(client, ['rollback', '0'], prefix)).toBe('rolled back to the rules of epoch 0, as epoch 2')
  await Promise.all(apps.map((app) => app.live.refresh()))
  const refused = await fetch(`${first.base}/items`)
  expect(refused.status).toBe(429)
  expect(refused.headers.get('ratelimit')).toBe('"api-10s";r=0;t=10')
  expect(
    JSON.parse(await rulesCommand(client, ['history', 'api'], prefix)).map((v: { epoch: number }) => v.epoch),
  ).toEqual([2, 1])
})
