import { MemoryStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import type { MakeHarness } from '../src/adapter-harness.js'
import { makeExpressHarness } from '../src/harness-express.js'
import { makeFastifyHarness, makeFastifyScopedHarness } from '../src/harness-fastify.js'
import { makeKoaHarness } from '../src/harness-koa.js'
import { Fleet, livePrefix } from '../src/live-rules-fixtures.js'

const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 60_000)

let client: Redis
let fleet: Fleet
beforeAll(() => {
  client = new Redis(inject('redisUrl'))
})
afterEach(async () => {
  await fleet?.close()
})
afterAll(async () => {
  await client.quit()
})

const harnesses: Array<[string, MakeHarness]> = [
  ['Express', makeExpressHarness],
  ['Fastify', makeFastifyHarness],
  ['Fastify (plugin options per scope)', makeFastifyScopedHarness],
  ['Koa', makeKoaHarness],
]

describe.each(harnesses)('%s with rules: liveRules', (_name, makeHarness) => {
  it('limits by the live rules, and by a published change from the next request on', async () => {
    fleet = new Fleet(client, livePrefix('adapters'))
    const live = fleet.add()
    const harness = await makeHarness({
      routes: [
        {
          method: 'GET',
          path: '/search',
          rateLimit: {
            rules: live,
            rule: 'search',
            store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }),
          },
        },
      ],
      trustProxy: false,
    })
    try {
      const first = await harness.request.get('/search')
      expect(first.status).toBe(200)
      expect(first.headers.ratelimit).toBe('"search-60s";r=4;t=60, "api-60s";r=9;t=60')
      await live.publish({
        search: { algorithm: 'fixed-window', windows: [{ limit: 1, period: '1m' }], parent: 'api' },
      })
      const refused = await harness.request.get('/search')
      expect(refused.status).toBe(429)
      // The count of the first request is kept under the new limit, which it already reaches.
      expect(refused.headers.ratelimit).toBe('"search-60s";r=0;t=60, "api-60s";r=9;t=60')
    } finally {
      await harness.close()
    }
  })
})
