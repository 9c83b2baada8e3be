import { createLimiter, MemoryStore, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { describe, expect, inject, it } from 'vitest'
import '@tollgate/test-support/provided-context'
import { rules, runDemo } from '../src/demo.js'

async function transcript(makeStore: (clock: () => number) => MemoryStore | RedisStore) {
  let now = 1_700_000_000_000
  const limiter = createLimiter({ store: makeStore(() => now), rules })
  const lines: string[] = []
  await runDemo(limiter, { set: (ms) => (now = ms) }, now, (line) => lines.push(line))
  await limiter.close()
  return lines
}

describe('quickstart demo', () => {
  it('shows the burst cut at 5 per 3 s, then the minute running out without charging the 3 s window', async () => {
    const lines = await transcript((clock) => new MemoryStore({ clock }))
    const rows = lines.filter((line) => /^\s+\d+\.\ds/.test(line))
    expect(rows[0]).toMatch(/0\.0s allowed\s+19\s+4/)
    expect(rows[5]).toMatch(/0\.5s refused by 3 s\s+15\s+0\s+2\.5 s/)
    expect(rows[22]).toMatch(/14\.0s refused by 60 s\s+0\s+5\s+46\.0 s/)
    expect(rows[24]).toMatch(/60\.1s allowed/)
  })

  it('prints the same on Redis', async () => {
    const client = new Redis(inject('redisUrl'))
    const prefix = `quickstart:${process.pid}:`
    const onRedis = await transcript((clock) => new RedisStore({ client, clock, prefix }))
    await client.quit()
    expect(onRedis).toEqual(await transcript((clock) => new MemoryStore({ clock })))
  })
})
