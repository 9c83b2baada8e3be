import type { AddressInfo } from 'node:net'
import { createLimiter, MemoryStore } from '@tollgate/core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createApp } from '../src/app.js'
import { rules } from '../src/rules.js'

const T0 = 1_763_712_000_000
let base: string
let close: () => Promise<void>

beforeAll(async () => {
  const limiter = createLimiter({
    store: new MemoryStore({ clock: () => T0 }),
    rules,
  })
  const server = createApp({ limiter })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  close = async () => {
    await new Promise((resolve) => server.close(resolve))
    await limiter.close()
  }
})
afterAll(() => close())

it('passes five requests with their RateLimit fields and refuses the sixth with a problem+json 429', async () => {
  const responses = []
  for (let i = 0; i < 6; i++) responses.push(await fetch(`${base}/items`))
  expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429])
  expect(responses[0]?.headers.get('ratelimit')).toBe('"api-10s";r=4;t=10')
  const refused = responses[5] as Response
  expect(refused.headers.get('content-type')).toBe('application/problem+json')
  expect(refused.headers.get('retry-after')).toBe('10')
  expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['api-10s'] })
  expect(await responses[0]?.json()).toEqual({ path: '/items' })
})
