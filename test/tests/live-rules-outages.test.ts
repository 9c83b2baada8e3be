import { readFileSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLimiter, LiveRules, MemoryStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { findFreePort } from '../src/free-port.js'
import { DEFAULTS, Fleet, livePrefix } from '../src/live-rules-fixtures.js'
import { pollUntil } from '../src/poll.js'
import { spawnRedisServer } from '../src/redis-server.js'

let client: Redis
let directory: string
const closing: Array<() => Promise<unknown>> = []
beforeAll(async () => {
  client = new Redis(inject('redisUrl'))
  directory = await mkdtemp(join(tmpdir(), 'tollgate-live-rules-'))
})
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close()
})
afterAll(async () => {
  await client.quit()
  await rm(directory, { recursive: true, force: true })
})

/** A client of a Redis that is not there: nothing listens on its port, and it neither retries nor queues. */
async function unreachableClient(): Promise<Redis> {
  const dead = new Redis({
    host: '127.0.0.1',
    port: await findFreePort(),
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  dead.on('error', () => {})
  closing.push(async () => dead.disconnect())
  return dead
}

function warningsOf(): { codes: string[]; onWarning: (message: string, code: string) => void } {
  const codes: string[] = []
  return { codes, onWarning: (_message, code) => codes.push(code) }
}

describe('LiveRules while Redis is down', () => {
  it('starts from its snapshot, stale until Redis answers, when Redis is down at start', async () => {
    const prefix = livePrefix('snapshot')
    const snapshotPath = join(directory, 'rules.json')
    const fleet = new Fleet(client, prefix)
    closing.push(() => fleet.close())
    const running = fleet.add({ snapshotPath })
    await running.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 33, period: '1m' }] } })
    await running.close()
    const saved = JSON.parse(readFileSync(snapshotPath, 'utf8'))
    expect(saved).toMatchObject({
      format: 'tollgate-live-rules',
      prefix,
      epoch: 1,
      rules: { api: { algorithm: 'fixed-window', windows: [{ limit: 33, period: '1m' }] } },
    })

    const warnings = warningsOf()
    const starting = new LiveRules({
      client: await unreachableClient(),
      defaults: DEFAULTS,
      prefix,
      snapshotPath,
      onWarning: warnings.onWarning,
    })
    closing.push(() => starting.close())
    const limiter = createLimiter({ rules: starting, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    closing.push(() => limiter.close())
    expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 33, periodMs: 60_000 }])
    expect((await limiter.consume('api', 'ip:1')).windows[0]?.limit).toBe(33)
    await expect(starting.refresh()).rejects.toMatchObject({ code: 'TG_STORE' })
    expect(starting.status()).toMatchObject({ epoch: 1, stale: true, rejected: [] })
    // Warned once for the outage, and once that nudges are not heard.
    expect(warnings.codes.sort()).toEqual(['TG_RULES_NUDGES_LOST', 'TG_RULES_UNREACHABLE'])
  })

  it('starts from the defaults without a snapshot, and from the defaults with one it cannot use', async () => {
    const prefix = livePrefix('no-snapshot')
    const unusable = join(directory, 'other-prefix.json')
    writeFileSync(
      unusable,
      JSON.stringify({ format: 'tollgate-live-rules', version: 1, prefix: 'x:', epoch: 3, rules: {} }),
    )
    for (const snapshotPath of [undefined, join(directory, 'missing.json'), unusable]) {
      const warnings = warningsOf()
      const live = new LiveRules({
        client: await unreachableClient(),
        defaults: DEFAULTS,
        prefix,
        nudges: false,
        onWarning: warnings.onWarning,
        ...(snapshotPath ? { snapshotPath } : {}),
      })
      closing.push(() => live.close())
      const limiter = createLimiter({ rules: live })
      closing.push(() => limiter.close())
      await expect(live.refresh()).rejects.toMatchObject({ code: 'TG_STORE' })
      expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 10, periodMs: 60_000 }])
      expect(live.status()).toMatchObject({ epoch: 0, stale: true })
      expect(warnings.codes).toEqual(
        snapshotPath === unusable ? ['TG_RULES_SNAPSHOT', 'TG_RULES_UNREACHABLE'] : ['TG_RULES_UNREACHABLE'],
      )
    }
  })

  it('keeps polling a Redis that fails, without throwing or an unhandled rejection, and warns once', async () => {
    const dead = await unreachableClient()
    // Each poll is one script call, read_rules.lua.
    let reads = 0
    const send = dead.sendCommand.bind(dead)
    dead.sendCommand = ((...args: Parameters<typeof send>) => {
      reads++
      return send(...args)
    }) as typeof dead.sendCommand
    const warnings = warningsOf()
    const live = new LiveRules({
      client: dead,
      defaults: DEFAULTS,
      prefix: livePrefix('poll-failing'),
      pollIntervalMs: 10,
      nudges: false,
      onWarning: warnings.onWarning,
    })
    closing.push(() => live.close())
    await pollUntil('five polls failed', 5_000, async () =>
      reads >= 5 ? { done: true, value: reads } : { done: false, state: `${reads} polls` },
    )
    expect(warnings.codes).toEqual(['TG_RULES_UNREACHABLE'])
    expect(live.status().stale).toBe(true)
  })

  it('recovers when Redis comes back, following what Redis holds then', async () => {
    const server = await spawnRedisServer()
    closing.push(() => server.stop())
    const own = new Redis(server.url, { retryStrategy: () => 20, maxRetriesPerRequest: 0 })
    own.on('error', () => {})
    closing.push(async () => own.disconnect())
    const warnings = warningsOf()
    const live = new LiveRules({
      client: own,
      defaults: DEFAULTS,
      pollIntervalMs: 0,
      nudges: false,
      onWarning: warnings.onWarning,
    })
    closing.push(() => live.close())
    const limiter = createLimiter({ rules: live })
    closing.push(() => limiter.close())
    await live.publish({ api: { windows: [{ limit: 70, period: '1m' }] } })
    await server.stop()
    await expect(live.refresh()).rejects.toMatchObject({ code: 'TG_STORE' })
    expect(live.status()).toMatchObject({ epoch: 1, stale: true })
    expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(70)

    // A server without persistence comes back empty: the rules it holds are the defaults.
    const restarted = await spawnRedisServer({ port: server.port })
    closing.push(() => restarted.stop())
    await pollUntil('a refresh succeeds', 10_000, async () => {
      await live.refresh()
      return { done: true, value: true }
    })
    expect(live.status()).toMatchObject({ epoch: 0, stale: false })
    expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(10)
    // The publish it held is gone from Redis: said, not only followed.
    expect(warnings.codes).toEqual(['TG_RULES_UNREACHABLE', 'TG_RULES_RECOVERED', 'TG_RULES_DIVERGED'])
  })
})

/**
 * A follower that applied a publish its server then lost, as a replica promoted before it got the
 * publish would lose it, and the server's next publish, which makes the same epoch again.
 */
async function lostPublish(options: { nudges: boolean }) {
  const server = await spawnRedisServer()
  closing.push(() => server.stop())
  const own = new Redis(server.url, { retryStrategy: () => 20 })
  own.on('error', () => {})
  closing.push(async () => own.disconnect())
  const admin = new Redis(server.url)
  closing.push(async () => admin.disconnect())
  const warnings = warningsOf()
  const follower = new LiveRules({
    client: own,
    defaults: DEFAULTS,
    pollIntervalMs: 0,
    onWarning: warnings.onWarning,
    ...options,
  })
  closing.push(() => follower.close())
  const limiter = createLimiter({ rules: follower })
  closing.push(() => limiter.close())
  const publisher = new LiveRules({ client: admin, defaults: DEFAULTS, pollIntervalMs: 0, nudges: false })
  closing.push(() => publisher.close())
  if (options.nudges) {
    await pollUntil('the follower subscribed', 5_000, async () => {
      const [, count] = (await admin.pubsub('NUMSUB', 'tg:{rules}:nudge')) as [string, number]
      return count === 1 ? { done: true, value: count } : { done: false, state: `${count} subscribers` }
    })
  }
  await publisher.publish({ api: { windows: [{ limit: 70, period: '1m' }] } })
  await follower.refresh()
  expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(70)

  await admin.flushall()
  await publisher.refresh()
  expect(await publisher.publish({ api: { windows: [{ limit: 90, period: '1m' }] } })).toEqual({ epoch: 1 })
  const limit = () => limiter.rules.get('api')?.windows[0]?.limit
  return { own, follower, publisher, limit, warnings }
}

describe('LiveRules on a server that lost a publish it held', () => {
  it('follows what the server holds once its client connects again, though the epoch is the same', async () => {
    const { own, follower, limit, warnings } = await lostPublish({ nudges: false })
    expect(limit()).toBe(70)
    own.disconnect(true)
    await pollUntil('the follower applies what the server holds', 5_000, async () =>
      limit() === 90 ? { done: true, value: undefined } : { done: false, state: `limit ${limit()}` },
    )
    expect(follower.status()).toMatchObject({ epoch: 1, stale: false })
    expect(warnings.codes).toContain('TG_RULES_DIVERGED')
  })

  it('follows what the server holds once it hears the publish that made the same epoch', async () => {
    const { follower, limit, warnings } = await lostPublish({ nudges: true })
    await pollUntil('the follower applies what the server holds', 5_000, async () =>
      limit() === 90 ? { done: true, value: undefined } : { done: false, state: `limit ${limit()}` },
    )
    expect(follower.status()).toMatchObject({ epoch: 1, stale: false })
    expect(warnings.codes).toContain('TG_RULES_DIVERGED')
  })

  it('reads every rule when the server moved past the epoch it holds by publishes it never had', async () => {
    const { follower, publisher, limit, warnings } = await lostPublish({ nudges: false })
    await publisher.publish({ search: { windows: [{ limit: 3, period: '1m' }], parent: 'api' } })
    await follower.refresh()
    expect(follower.status()).toMatchObject({ epoch: 2, stale: false })
    expect(limit()).toBe(90)
    expect(warnings.codes).toContain('TG_RULES_DIVERGED')
  })

  it('refuses a publish that expects the epoch it held, which another publish made', async () => {
    const { follower, limit } = await lostPublish({ nudges: false })
    await expect(
      follower.publish({ api: { windows: [{ limit: 50, period: '1m' }] } }, { expectedEpoch: 1 }),
    ).rejects.toMatchObject({ code: 'TG_CONFLICT', message: /another publish made epoch 1/ })
    // It read what the server holds on the way.
    expect(limit()).toBe(90)
  })
})
