import { createLimiter, type Limiter, LiveRules, MemoryStore, type RuleOptions } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULTS } from '../src/live-rules-fixtures.js'
import { pollUntil } from '../src/poll.js'
import { withNode } from '../src/redis-one-off-connection.js'
import { type SpawnedSentinel, sentinelClient, spawnRedisSentinel, waitForFailover } from '../src/redis-sentinel.js'

const PREFIX = 'lost-publish:'
const api = (limit: number): RuleOptions => ({ algorithm: 'fixed-window', windows: [{ limit, period: '1m' }] })

/** One process of the fleet: its own connection through the sentinels, its live rules and a limiter following them. */
interface Process {
  readonly name: string
  readonly client: Redis
  readonly live: LiveRules
  readonly limiter: Limiter
  readonly warnings: string[]
}

describe('LiveRules when a failover loses a publish', () => {
  let setup: SpawnedSentinel | undefined
  const processes: Process[] = []
  beforeAll(async () => {
    setup = await spawnRedisSentinel()
  }, 30_000)
  afterAll(async () => {
    for (const { limiter, live, client } of processes) {
      await limiter.close()
      await live.close()
      client.disconnect()
    }
    await setup?.stop()
  }, 20_000)

  function start(name: string, options: { pollIntervalMs: number; nudges: boolean }): Process {
    if (setup === undefined) throw new Error('the sentinels did not start in beforeAll')
    const client = sentinelClient(setup)
    // Connections drop in the failover; what matters is what the live rules make of it.
    client.on('error', () => {})
    const warnings: string[] = []
    const live = new LiveRules({
      client,
      defaults: DEFAULTS,
      prefix: PREFIX,
      ...options,
      onWarning: (_message, code) => warnings.push(code),
    })
    const limiter = createLimiter({ rules: live, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const process = { name, client, live, limiter, warnings }
    processes.push(process)
    return process
  }

  /** Refreshes until Redis answers: a client finds the promoted master through the sentinels in its own time. */
  const refreshed = (process: Process) =>
    pollUntil(`${process.name} reads the promoted master`, 15_000, async () => {
      await process.live.refresh()
      return { done: true, value: undefined }
    })

  it('brings every process to what the promoted master holds, though the lost publish and the next share an epoch', async () => {
    if (setup === undefined) throw new Error('the sentinels did not start in beforeAll')
    const { master, replica } = setup
    const publisher = start('publisher', { pollIntervalMs: 0, nudges: false })
    // Two that neither poll nor hear nudges: they read when told, and when their client connects
    // again, to whichever master it finds then; and one as deployed.
    const [behind, further, deployed] = [
      start('behind', { pollIntervalMs: 0, nudges: false }),
      start('further behind', { pollIntervalMs: 0, nudges: false }),
      start('deployed', { pollIntervalMs: 100, nudges: true }),
    ] as [Process, Process, Process]
    const followers = [behind, further, deployed]

    expect(await publisher.live.publish({ api: api(100) })).toEqual({ epoch: 1 })
    expect(await publisher.client.wait(1, 5_000)).toBe(1)

    // Replication held back: the replica stopped, then its link cut on the master, so that it can
    // neither take the next write nor come back for it. Stopped well within down-after-milliseconds,
    // the sentinels still promote it.
    replica.kill('SIGSTOP')
    await withNode(master.port, (client) => client.call('CLIENT', 'KILL', 'TYPE', 'replica'))
    expect(await publisher.live.publish({ api: api(200) })).toEqual({ epoch: 2 })
    await Promise.all(followers.map((process) => process.live.refresh()))
    for (const process of followers) expect(process.limiter.rules.get('api')?.windows[0]?.limit).toBe(200)

    master.kill('SIGKILL')
    replica.kill('SIGCONT')
    await waitForFailover(setup, master.port)

    // The promoted replica never had epoch 2: its next publish makes an epoch 2 of its own.
    await refreshed(publisher)
    expect(publisher.live.epoch).toBe(1)
    expect(await publisher.live.publish({ api: api(300) })).toEqual({ epoch: 2 })
    await refreshed(behind)
    // And one more, so that a process that missed that one finds the rules past the epoch it holds.
    expect(await publisher.live.publish({ search: { ...api(7), parent: 'api' } })).toEqual({ epoch: 3 })
    await refreshed(behind)
    await refreshed(further)

    const held = JSON.parse((await publisher.client.hget(`${PREFIX}{rules}:current`, 'api')) as string) as RuleOptions
    expect(held.windows[0]?.limit).toBe(300)
    await pollUntil('the deployed process follows the promoted master', 10_000, async () => {
      const limit = deployed.limiter.rules.get('api')?.windows[0]?.limit
      return limit === 300 && deployed.live.epoch === 3
        ? { done: true, value: undefined }
        : { done: false, state: `epoch ${deployed.live.epoch}, api limit ${limit}` }
    })
    for (const process of [publisher, ...followers]) {
      expect(process.live.status(), process.name).toMatchObject({ epoch: 3, stale: false, rejected: [] })
      const decision = await process.limiter.peek('search', 'ip:1')
      expect(
        decision.windows.map((window) => [window.rule, window.limit]),
        process.name,
      ).toEqual([
        ['search', 7],
        ['api', held.windows[0]?.limit],
      ])
    }
    // Each process that held the lost publish said so.
    for (const process of [publisher, behind, further])
      expect(process.warnings, process.name).toContain('TG_RULES_DIVERGED')
  }, 60_000)
})
