import { hostname } from 'node:os'
import {
  createLimiter,
  HybridStore,
  MemoryStore,
  type RulesOptions,
  readFleetProcesses,
  readFleetSeconds,
  readTopRefused,
  shareFleetStats,
  TollgateConfigError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../src/manual-clock.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

const T0 = 1_763_700_000_000
const SECOND = Math.floor(T0 / 1000)
const rules = {
  login: {
    algorithm: 'fixed-window',
    windows: [
      { limit: 20, period: '1m' },
      { limit: 5, period: '3s' },
    ],
  },
  api: { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1m' }] },
} satisfies RulesOptions

describe('fleet stats', () => {
  // A server of its own: its command counts are this file's alone.
  let server: SpawnedRedis
  let client: Redis
  let prefixes = 0
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
  }, 30_000)
  afterAll(async () => {
    await client?.quit()
    await server?.stop()
  })

  async function hincrbyCalls(): Promise<number> {
    const match = /cmdstat_hincrby:calls=(\d+)/.exec(await client.info('commandstats'))
    return match ? Number(match[1]) : 0
  }

  it("sums every process's decisions per second by rule, outcome and window, with one pipeline per flush, never a write per request", async () => {
    const prefix = `fleet${prefixes++}:`
    const limiters = [0, 1, 2].map(() =>
      createLimiter({ rules, store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }), onWarning: () => {} }),
    )
    const stats = limiters.map((limiter) => shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000 }))
    const before = await hincrbyCalls()
    const expected = { allowed: 0, limited: 0, denied3s: 0, denied60s: 0, api: 0 }
    for (let i = 0; i < 3_000; i++) {
      const limiter = limiters[i % 3] as (typeof limiters)[number]
      const decision = await limiter.consume('login', `ip:10.0.0.${i % 50}`)
      if (decision.allowed) expected.allowed++
      else expected.limited++
      for (const window of decision.windows) {
        if (window.failed && window.periodMs === 3_000) expected.denied3s++
        if (window.failed && window.periodMs === 60_000) expected.denied60s++
      }
      if (i % 10 === 0) {
        await limiter.consume('api', 'user:1')
        expected.api++
      }
    }
    await Promise.all(stats.map((s) => s.flush()))
    // Three flushes: a handful of commands each, whatever the 3,300 decisions.
    expect((await hincrbyCalls()) - before).toBeLessThanOrEqual(3 * 6)
    const [second] = await readFleetSeconds(client, prefix, SECOND, SECOND)
    expect(second?.rules.login?.decisions).toEqual({ allowed: expected.allowed, limited: expected.limited })
    expect(second?.rules.login?.denials).toEqual({ '3s': expected.denied3s })
    // The 3 s window's 5 binds before the minute's 20: the minute never refuses here.
    expect(expected.denied60s).toBe(0)
    expect(second?.rules.api?.decisions).toEqual({ allowed: expected.api })
    // Each process counts on its own MemoryStore: 5 per address in each.
    expect(expected.allowed).toBe(3 * 50 * 5)
    await Promise.all(stats.map((s) => s.close()))
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })

  it('names the most refused identifiers of the fleet, heaviest first', async () => {
    const prefix = `fleet${prefixes++}:`
    const limiters = [0, 1].map(() =>
      createLimiter({ rules, store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }), onWarning: () => {} }),
    )
    const clock = new ManualClock(T0)
    const stats = limiters.map((limiter) =>
      shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000, topSize: 20, clock: clock.now }),
    )
    // One address hammers both processes; a thousand others are each refused once.
    for (let i = 0; i < 400; i++)
      await (limiters[i % 2] as (typeof limiters)[number]).consume('login', 'ip:203.0.113.7')
    for (let i = 0; i < 1_000; i++) {
      const limiter = limiters[i % 2] as (typeof limiters)[number]
      await limiter.consume('login', `ip:198.51.100.${i % 250}`, { cost: 25 })
    }
    // The lists are written at the first flush topIntervalMs (10 s) after the last.
    clock.advance(10_000)
    await Promise.all(stats.map((s) => s.flush()))
    const top = await readTopRefused(client, prefix, { sinceMs: 60_000, nowMs: clock.now(), limit: 3 })
    expect(top[0]).toMatchObject({ rule: 'login', identifier: 'ip:203.0.113.7' })
    // Each process refused it 190 times (the first ten of its 400 passed the 3 s window's 5, as 5 + 5).
    expect(top[0]?.refusals).toBe(400 - 5 - 5)
    expect(top).toHaveLength(3)
    await Promise.all(stats.map((s) => s.close()))
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })

  it("lists the live processes with their HybridStore's stats", async () => {
    const prefix = `fleet${prefixes++}:`
    const store = new HybridStore({ client, prefix, autoSync: false, clock: () => T0 })
    const limiter = createLimiter({ rules, store })
    const stats = shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000 })
    await limiter.consume('api', 'user:1')
    await stats.flush()
    const processes = await readFleetProcesses(client, prefix)
    expect(processes).toHaveLength(1)
    expect(processes[0]?.hybrid).toMatchObject({ trackedKeys: 1, mode: 'synced' })
    // Named by host, so that an operator finds it: not a bare pid and random characters.
    const host = hostname()
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .slice(0, 63)
    expect(processes[0]?.instance).toBe(`${host}/${process.pid}-${processes[0]?.instance.slice(-8)}`)
    expect(processes[0]?.instance).toMatch(/-[0-9a-f]{8}$/)
    await stats.close()
    await limiter.close()
  })

  it("keeps a HybridStore's over-admission by rule in the process's stats (its Maps were written as {})", async () => {
    const prefix = `fleet${prefixes++}:`
    const stores = [0, 1].map(() => new HybridStore({ client, prefix, autoSync: false, clock: () => T0 }))
    const limiters = stores.map((store) => createLimiter({ rules, store }))
    const stats = limiters.map((limiter) => shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000 }))
    // Each process admits the whole minute's 100 on its own before either syncs: the second to sync pushes 100 above it.
    for (const limiter of limiters) for (let i = 0; i < 100; i++) await limiter.consume('api', 'user:1')
    for (const store of stores) await store.syncNow()
    await Promise.all(stats.map((s) => s.flush()))
    const processes = await readFleetProcesses(client, prefix)
    const overAdmitted = processes.map((process) => process.hybrid?.overAdmittedByRule)
    expect(overAdmitted).toContainEqual({ api: 100 })
    expect(processes.map((process) => process.hybrid?.leaseRoundTripsByRule)).toEqual([{}, {}])
    await Promise.all(stats.map((s) => s.close()))
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })

  it('refuses bad options by name', () => {
    const limiter = createLimiter({ rules })
    expect(() => shareFleetStats(limiter, { client: {} as never })).toThrow(TollgateConfigError)
    expect(() => shareFleetStats(limiter, { client, flushIntervalMs: 0 })).toThrow(
      'shareFleetStats option flushIntervalMs must be an integer ≥ 10, got 0',
    )
    // Past a timer's longest delay Node would flush every millisecond.
    expect(() => shareFleetStats(limiter, { client, flushIntervalMs: 2 ** 31 })).toThrow(
      'shareFleetStats option flushIntervalMs must be at most 2147483647, got 2147483648',
    )
    expect(() => shareFleetStats(limiter, { client, prefix: '{x}' })).toThrow(/prefix/)
    expect(() => shareFleetStats(limiter, { client, prefix: '{x}' })).toThrow(/^shareFleetStats option prefix must be/)
    void limiter.close()
  })
})
