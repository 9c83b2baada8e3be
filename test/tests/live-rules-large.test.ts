import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setTimeout as delay } from 'node:timers/promises'
import { createLimiter, type LiveRules, MemoryStore, type RuleOptions } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { Fleet, livePrefix } from '../src/live-rules-fixtures.js'

// What one changed rule may cost a process's event loop, publisher or follower, however many
// rules there are: decisions wait while it runs.
const BLOCK_BOUND_MS = 50

let client: Redis
let fleet: Fleet | undefined
beforeAll(() => {
  client = new Redis(inject('redisUrl'))
})
afterAll(async () => {
  await client.quit()
})
afterEach(async () => {
  await fleet?.close()
  fleet = undefined
})

/**
 * `tenants` rules, each the parent of `children - 1` more: a child's chain runs through its
 * tenant, so that a changed tenant changes the chains of its children too.
 */
function tenantRules(tenants: number, children: number): Record<string, RuleOptions> {
  const rules: Record<string, RuleOptions> = {}
  for (let t = 0; t < tenants; t++) {
    rules[`tenant-${t}`] = { algorithm: 'fixed-window', windows: [{ limit: 1_000 + t, period: '1h' }] }
    for (let c = 1; c < children; c++) {
      rules[`tenant-${t}.route-${c}`] = {
        algorithm: 'fixed-window',
        windows: [{ limit: 10 + c, period: '1m' }],
        parent: `tenant-${t}`,
      }
    }
  }
  return rules
}

/** The longest the event loop was blocked while `work` ran, in milliseconds, and what it resolved to. */
async function longestBlock<T>(work: () => Promise<T>): Promise<{ blockedMs: number; value: T }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 })
  histogram.enable()
  try {
    // Its first firing only sets where it counts from: a block before it would go unseen.
    for (let waited = 0; histogram.count === 0; waited++) {
      if (waited === 1_000) throw new Error('the event-loop delay histogram recorded nothing')
      await delay(1)
    }
    const value = await work()
    // The histogram's timer was due while the loop was blocked: it fires, and records how late,
    // before a timer set now does.
    await delay(2)
    return { blockedMs: histogram.max / 1e6, value }
  } finally {
    histogram.disable()
  }
}

describe('LiveRules with tens of thousands of rules', () => {
  it('publishes 60,000 rules in one publish, and a new process reads them all', async () => {
    fleet = new Fleet(client, livePrefix('sixty-thousand'))
    const publisher = fleet.add()
    const rules = tenantRules(600, 100)
    expect(Object.keys(rules)).toHaveLength(60_000)
    expect(await publisher.publish(rules)).toEqual({ epoch: 1 })
    expect(await client.hlen(`${fleet.prefix}{rules}:current`)).toBe(60_000)

    const follower = fleet.add()
    const limiter = createLimiter({ rules: follower, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    await follower.refresh()
    expect(follower.status()).toMatchObject({ epoch: 1, stale: false, rejected: [] })
    // The fixture's two defaults and every rule published.
    expect(limiter.rules.size).toBe(60_002)
    expect(limiter.rules.get('tenant-599.route-99')?.chain.map((rule) => rule.name)).toEqual([
      'tenant-599.route-99',
      'tenant-599',
    ])
    await limiter.close()
  })

  it('brings one changed rule of 30,000 to a follower in a short block of its event loop, and the publish too', async () => {
    fleet = new Fleet(client, livePrefix('one-of-thirty-thousand'))
    const publisher = fleet.add()
    const follower = fleet.add()
    const limiters = [publisher, follower].map((live: LiveRules) =>
      createLimiter({ rules: live, store: new MemoryStore({ sweepIntervalMs: 0 }) }),
    )
    const [, followed] = limiters as [unknown, (typeof limiters)[number]]
    await publisher.publish(tenantRules(300, 100))
    await follower.refresh()
    expect(followed.rules.size).toBe(30_002)

    const blocks: Record<string, number> = {}
    for (const [round, [rule, options]] of [
      // A leaf, then a tenant: its 99 routes' chains run through it.
      ['tenant-7.route-3', { algorithm: 'fixed-window', windows: [{ limit: 4, period: '1m' }], parent: 'tenant-7' }],
      ['tenant-150', { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1h' }] }],
    ].entries() as IterableIterator<[number, [string, RuleOptions]]>) {
      const published = await longestBlock(() => publisher.publish({ [rule]: options }))
      const applied = await longestBlock(() => follower.refresh())
      blocks[`publish ${rule}`] = published.blockedMs
      blocks[`follow ${rule}`] = applied.blockedMs
      expect(published.value).toEqual({ epoch: round + 2 })
      expect(follower.epoch).toBe(round + 2)
      expect(followed.rules.get(rule)?.windows[0]?.limit).toBe(options.windows[0]?.limit)
    }
    // The tenant's routes follow their parent's new windows.
    expect(followed.rules.get('tenant-150.route-42')?.chain[1]?.windows).toEqual([{ limit: 5, periodMs: 3_600_000 }])
    expect(followed.rules.get('tenant-150.route-42')?.chain[1]).toBe(followed.rules.get('tenant-150'))
    console.log(
      `[live-rules-large] longest event-loop block (ms): ${Object.entries(blocks)
        .map(([what, ms]) => `${what} ${ms.toFixed(1)}`)
        .join(', ')}`,
    )
    for (const [what, ms] of Object.entries(blocks)) expect(ms, what).toBeLessThan(BLOCK_BOUND_MS)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })
})
