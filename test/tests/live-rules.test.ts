import { once } from 'node:events'
import {
  createLimiter,
  type Decision,
  type Duration,
  HybridStore,
  type Limiter,
  type LiveRules,
  loadRules,
  MemoryStore,
  RedisStore,
  type RuleRejection,
  type RulesChange,
  type Store,
  type StoreRequest,
  type StoreResult,
  stateNameOf,
  TollgateError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { publishRulesScript, readRulesScript } from '../../packages/core/src/scripts/generated.js'
import { DEFAULTS, Fleet, livePrefix } from '../src/live-rules-fixtures.js'
import { ManualClock } from '../src/manual-clock.js'
import { pollUntil } from '../src/poll.js'
import { keyValues } from '../src/redis-keys.js'

const T0 = 1_763_700_000_000 - (1_763_700_000_000 % 60_000)

let client: Redis
let fleet: Fleet
beforeAll(() => {
  client = new Redis(inject('redisUrl'))
})
afterAll(async () => {
  await client.quit()
})
afterEach(async () => {
  await fleet?.close()
})

function newFleet(name: string, defaults = DEFAULTS as ConstructorParameters<typeof Fleet>[2]): Fleet {
  fleet = new Fleet(client, livePrefix(name), defaults)
  return fleet
}

const remaining = (decision: Decision) => decision.windows.map((window) => window.remaining)
const limits = (decision: Decision) => decision.windows.map((window) => window.limit)

describe('LiveRules publish', () => {
  it('applies a new limit to the next decision of every process, keeping the counts', async () => {
    const fleet = newFleet('publish')
    const clock = new ManualClock(T0)
    const [a, b] = [fleet.add(), fleet.add()]
    const store = () => new RedisStore({ client, clock: clock.now, prefix: fleet.prefix })
    const [limiterA, limiterB] = [a, b].map((live) => createLimiter({ rules: live, store: store() }))
    for (let i = 0; i < 3; i++) await limiterA?.consume('api', 'ip:1')
    expect(remaining(await limiterB!.peek('api', 'ip:1'))).toEqual([7])

    const { epoch } = await a.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } })
    expect(epoch).toBe(1)
    // The publisher applied it before publish resolved; another process at its next read.
    expect(a.epoch).toBe(1)
    expect(limits(await limiterA!.peek('api', 'ip:1'))).toEqual([20])
    expect(limits(await limiterB!.peek('api', 'ip:1'))).toEqual([10])
    await b.refresh()
    const decision = await limiterB!.consume('api', 'ip:1')
    expect(limits(decision)).toEqual([20])
    expect(remaining(decision)).toEqual([16])
    expect(limiterB?.rules.get('api')?.windows).toEqual([{ limit: 20, periodMs: 60_000 }])
    await Promise.all([limiterA, limiterB].map((limiter) => limiter?.close()))
  })

  it("with a HybridStore, reads the epoch on the store's sync: a sync alone brings a publish in", async () => {
    const fleet = newFleet('hybrid-sync')
    const clock = new ManualClock(T0)
    const [publisher, follower] = [fleet.add(), fleet.add()]
    const store = new HybridStore({ client, clock: clock.now, prefix: fleet.prefix, autoSync: false })
    const limiter = createLimiter({ rules: follower, store })
    await publisher.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 30, period: '1m' }] } })
    expect(limits(await limiter.peek('api', 'ip:1'))).toEqual([10])
    // Neither a poll nor a nudge: the follower polls never (pollIntervalMs 0) and hears none.
    const applied = once(limiter, 'rules')
    expect((await store.syncNow()).error).toBeUndefined()
    const [change] = (await applied) as [RulesChange]
    expect(change.epoch).toBe(1)
    expect(limits(await limiter.peek('api', 'ip:1'))).toEqual([30])
    await limiter.close()
    // Closed, the limiter no longer reads the epoch on the store's syncs.
    await publisher.publish({ api: null })
    await store.syncNow()
    expect(follower.epoch).toBe(1)
  })

  it('runs a decision on the rules it started with, and the next one on the new rules', async () => {
    const fleet = newFleet('in-flight')
    const live = fleet.add()
    const held = new HeldStore(new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }))
    const limiter = createLimiter({ rules: live, store: held, storeTimeoutMs: 10_000 })
    const started = limiter.consume('api', 'ip:1')
    await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 50, period: '1m' }] } })
    const next = limiter.consume('api', 'ip:1')
    held.release()
    expect(limits(await started)).toEqual([10])
    expect(limits(await next)).toEqual([50])
    expect(remaining(await next)).toEqual([48])
    await limiter.close()
  })

  it('sends a rule whose override is dropped back to its default, never to no limit', async () => {
    const fleet = newFleet('drop')
    const live = fleet.add()
    const limiter = createLimiter({ rules: live, store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }) })
    const changes: RulesChange[] = []
    limiter.on('rules', (change) => changes.push(change))
    await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '1m' }] } })
    await limiter.consume('api', 'ip:1')
    await limiter.consume('api', 'ip:1')
    expect((await limiter.consume('api', 'ip:1')).allowed).toBe(false)
    await live.publish({ api: null })
    expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 10, periodMs: 60_000 }])
    const back = await limiter.consume('api', 'ip:1')
    expect(back).toMatchObject({ allowed: true, windows: [{ limit: 10, remaining: 7 }] })
    expect(changes).toEqual([
      { epoch: 1, changed: ['api'] },
      { epoch: 2, changed: ['api'] },
    ])
    await limiter.close()
  })

  it('publishes rules a YAML rules file holds, with their parents', async () => {
    const fleet = newFleet('yaml')
    const live = fleet.add()
    const limiter = createLimiter({ rules: live, store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }) })
    const yaml = `limits:
  - name: api
    algorithm: fixed-window
    config:
      - { limit: 100, period: 60 }
  - name: export
    algorithm: fixed-window
    parent: api
    config:
      - { limit: 3, period: 3600 }
`
    await live.publish(loadRules(yaml))
    expect([...limiter.rules.keys()]).toEqual(['api', 'search', 'export'])
    expect(limiter.rules.get('export')?.chain.map((rule) => rule.name)).toEqual(['export', 'api'])
    const decision = await limiter.consume('export', 'ip:1')
    expect(decision.windows.map((w) => [w.rule, w.limit, w.periodMs])).toEqual([
      ['export', 3, 3_600_000],
      ['api', 100, 60_000],
    ])
    expect((await live.history())[0]?.changes.map((change) => change.rule)).toEqual(['api', 'export'])
    await limiter.close()
  })
})

describe('LiveRules validation', () => {
  const invalid: Array<[string, Parameters<LiveRules['publish']>[0], RegExp]> = [
    [
      'a limit of 0',
      { api: { windows: [{ limit: 0, period: '1m' }] } },
      /rule 'api', window 0: limit must be a positive integer, got 0/,
    ],
    [
      'an unknown option (a newer version)',
      { api: { windows: [{ limit: 5, period: '1m' }], burst: 3 } as never },
      /unknown option 'burst'/,
    ],
    [
      'an unknown parent',
      { search: { windows: [{ limit: 5, period: '1m' }], parent: 'apii' } },
      /unknown parent 'apii'/,
    ],
    ['a parent cycle', { api: { windows: [{ limit: 5, period: '1m' }], parent: 'search' } }, /parent cycle/],
    [
      'a function where a value goes',
      { api: { windows: [{ limit: 5, period: '1m' }], algorithm: (() => 'gcra') as never } },
      /unknown algorithm/,
    ],
    ['no rule at all', {}, /at least one rule/],
    // Values JSON cannot hold at all: refused as createLimiter would refuse them, not as JSON would.
    [
      'a BigInt limit',
      { api: { windows: [{ limit: 5n as never, period: '1m' }] } },
      /rule 'api', window 0: limit must be a positive integer/,
    ],
    ['undefined options', { api: undefined as never }, /rule 'api'/],
  ]

  it.each(invalid)('refuses %s with TG_CONFIG and writes nothing', async (_what, changes, message) => {
    const fleet = newFleet('invalid')
    const live = fleet.add()
    await live.publish({ extra: { windows: [{ limit: 1, period: '1s' }] } })
    const before = await keyValues(client, fleet.prefix)
    await expect(live.publish(changes)).rejects.toMatchObject({ code: 'TG_CONFIG', message })
    expect(await keyValues(client, fleet.prefix)).toEqual(before)
    expect(live.epoch).toBe(1)
  })

  it('refuses to drop a rule another rule names as its parent', async () => {
    const fleet = newFleet('parent-drop')
    const live = fleet.add()
    await live.publish({ base: { windows: [{ limit: 9, period: '1m' }] } })
    await live.publish({ leaf: { windows: [{ limit: 1, period: '1m' }], parent: 'base' } })
    const before = await keyValues(client, fleet.prefix)
    await expect(live.publish({ base: null })).rejects.toMatchObject({
      code: 'TG_CONFIG',
      message: "rule 'leaf': unknown parent 'base'",
    })
    expect(await keyValues(client, fleet.prefix)).toEqual(before)
  })

  it("refuses what a following limiter's store cannot run", async () => {
    const fleet = newFleet('store-check')
    const live = fleet.add()
    const hybrid = new HybridStore({ client, prefix: fleet.prefix, autoSync: false })
    const limiter = createLimiter({ rules: live, store: hybrid })
    await expect(
      live.publish({ api: { algorithm: 'sliding-log', windows: [{ limit: 5, period: '1m' }] } }),
    ).rejects.toMatchObject({ code: 'TG_CONFIG', message: /algorithm 'sliding-log' cannot run on HybridStore/ })
    expect(await client.exists(live.epochKey)).toBe(0)
    await limiter.close()
  })

  it('refuses a publish whose expected epoch is not current with TG_CONFLICT, and writes nothing', async () => {
    const fleet = newFleet('conflict')
    const [a, b] = [fleet.add(), fleet.add()]
    await a.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 11, period: '1m' }] } })
    const before = await keyValues(client, fleet.prefix)
    const conflict = b.publish(
      { api: { algorithm: 'fixed-window', windows: [{ limit: 12, period: '1m' }] } },
      { expectedEpoch: 0 },
    )
    await expect(conflict).rejects.toBeInstanceOf(TollgateError)
    await expect(conflict).rejects.toMatchObject({ code: 'TG_CONFLICT', message: /at epoch 1, not 0/ })
    expect(await keyValues(client, fleet.prefix)).toEqual(before)
    // At the epoch it read, it goes through.
    expect(await b.publish({ api: null }, { expectedEpoch: 1 })).toEqual({ epoch: 2 })
  })

  it('publishes on top of a publish it raced when no epoch is expected', async () => {
    const fleet = newFleet('race')
    const [a, b] = [fleet.add(), fleet.add()]
    const results = await Promise.all([
      a.publish({ one: { windows: [{ limit: 1, period: '1m' }] } }),
      b.publish({ two: { windows: [{ limit: 2, period: '1m' }] } }),
    ])
    expect(results.map((r) => r.epoch).sort()).toEqual([1, 2])
    await Promise.all([a.refresh(), b.refresh()])
    expect(Object.keys(await client.hgetall(`${fleet.prefix}{rules}:current`)).sort()).toEqual(['one', 'two'])
  })
})

describe('LiveRules reading stored rules', () => {
  it('rejects a stored rule that fails validation in every process, keeps the last good one and moves on', async () => {
    const fleet = newFleet('corrupt')
    const [a, b] = [fleet.add(), fleet.add()]
    const limiter = createLimiter({ rules: b, store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }) })
    const rejected: RuleRejection[] = []
    limiter.on('rules-rejected', (rejection) => rejected.push(rejection))
    await a.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 15, period: '1m' }] } })
    await b.refresh()
    // Written around the API, as a newer version or a hand edit would, with the epoch bumped.
    const keys = {
      epoch: b.epochKey,
      current: `${fleet.prefix}{rules}:current`,
      changed: `${fleet.prefix}{rules}:changed`,
    }
    await client.hset(keys.current, 'api', '{"windows":[{"limit":15,"period":"1m"}],"burst":3}')
    await client.hset(keys.current, 'search', 'not json')
    await client.zadd(keys.changed, 2, 'api', 2, 'search')
    await client.set(keys.epoch, '2')

    for (const live of [a, b]) {
      await live.refresh()
      expect(live.epoch).toBe(2)
      expect(live.status()).toMatchObject({
        epoch: 2,
        stale: false,
        rejected: [
          { rule: 'api', epoch: 2, message: expect.stringContaining("unknown option 'burst'") },
          { rule: 'search', epoch: 2, message: expect.stringContaining('not JSON') },
        ],
      })
    }
    expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 15, periodMs: 60_000 }])
    expect(limiter.rules.get('search')?.windows).toEqual([{ limit: 5, periodMs: 60_000 }])
    expect(rejected.map((r) => r.rule)).toEqual(['api', 'search'])
    expect(fleet.warnings.filter((w) => w.code === 'TG_RULES_REJECTED')).toHaveLength(4)
    // Not read again: the epoch moved past it.
    await b.refresh()
    expect(rejected).toHaveLength(2)

    // A good version clears the rejection.
    await a.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 16, period: '1m' }] } })
    await b.refresh()
    expect(b.status().rejected.map((r) => r.rule)).toEqual(['search'])
    expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 16, periodMs: 60_000 }])
    await limiter.close()
  })

  it('applies the changes of one publish together, a rule and the new parent it names', async () => {
    const fleet = newFleet('together')
    const [a, b] = [fleet.add(), fleet.add()]
    await a.publish({
      tenant: { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1h' }] },
      search: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }], parent: 'tenant' },
    })
    const limiter = createLimiter({ rules: b, store: new MemoryStore({ clock: () => T0, sweepIntervalMs: 0 }) })
    await b.refresh()
    expect(limiter.rules.get('search')?.chain.map((rule) => rule.name)).toEqual(['search', 'tenant'])
    expect(b.status().rejected).toEqual([])
    await limiter.close()
  })

  it('brings several processes to one epoch and one rule set', async () => {
    const fleet = newFleet('converge')
    const processes = [fleet.add(), fleet.add(), fleet.add(), fleet.add()]
    const limiters = processes.map((live) => createLimiter({ rules: live }))
    for (const [i, live] of processes.entries()) {
      await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 100 + i, period: '1m' }] } })
    }
    await processes[1]?.publish({ search: null, export: { windows: [{ limit: 1, period: '1h' }] } })
    await Promise.all(processes.map((live) => live.refresh()))
    expect(processes.map((live) => live.epoch)).toEqual([5, 5, 5, 5])
    const sets = limiters.map((limiter) =>
      JSON.stringify([...limiter.rules.values()].map((rule) => [rule.name, rule.windows, rule.parent])),
    )
    expect(new Set(sets).size).toBe(1)
    expect(limiters[0]?.rules.get('api')?.windows[0]?.limit).toBe(103)
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })

  it('hears a publish by its nudge, without polling', async () => {
    const fleet = newFleet('nudge')
    const publisher = fleet.add()
    const listener = fleet.add({ nudges: true })
    const limiter = createLimiter({ rules: listener })
    const channel = `${fleet.prefix}{rules}:nudge`
    await pollUntil('the listener subscribed', 5_000, async () => {
      const [, count] = (await client.pubsub('NUMSUB', channel)) as [string, number]
      return count === 1 ? { done: true, value: count } : { done: false, state: `${count} subscribers` }
    })
    // Whatever the subscription's own catch-up read found is settled before the publish.
    await listener.refresh()
    const applied = once(limiter, 'rules') as Promise<[RulesChange]>
    await publisher.publish({ api: { windows: [{ limit: 42, period: '1m' }] } })
    expect((await applied)[0]).toEqual({ epoch: 1, changed: ['api'] })
    expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(42)
    await limiter.close()
  })

  it('refreshes when another component hands it an epoch read elsewhere (noteEpoch)', async () => {
    const fleet = newFleet('note-epoch')
    const [publisher, follower] = [fleet.add(), fleet.add()]
    const limiter = createLimiter({ rules: follower })
    await publisher.publish({ api: { windows: [{ limit: 7, period: '1m' }] } })
    const applied = once(limiter, 'rules') as Promise<[RulesChange]>
    follower.noteEpoch(Number(await client.get(follower.epochKey)))
    expect((await applied)[0]).toEqual({ epoch: 1, changed: ['api'] })
    expect(follower.epochKey).toBe(`${fleet.prefix}{rules}:epoch`)
    await limiter.close()
  })
})

describe('LiveRules and its limiters', () => {
  it('gives every limiter the new rules even when a listener of one throws, then throws its error', async () => {
    const fleet = newFleet('listener-throws')
    const [publisher, follower] = [fleet.add(), fleet.add()]
    const [first, second] = [createLimiter({ rules: follower }), createLimiter({ rules: follower })]
    first.on('rules', () => {
      throw new Error('listener failed')
    })
    await publisher.publish({ api: { windows: [{ limit: 3, period: '1m' }] } })
    await expect(follower.refresh()).rejects.toThrow('listener failed')
    expect([first, second].map((limiter) => limiter.rules.get('api')?.windows[0]?.limit)).toEqual([3, 3])
    expect(follower.epoch).toBe(1)
    await Promise.all([first.close(), second.close()])
  })

  it('stops sending rules to a limiter once it is closed', async () => {
    const fleet = newFleet('unfollow')
    const live = fleet.add()
    const limiter = createLimiter({ rules: live })
    await limiter.close()
    await live.publish({ api: { windows: [{ limit: 3, period: '1m' }] } })
    expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(10)
  })

  it('ships scripts whose SHA1 is the one Redis computes', async () => {
    for (const script of [publishRulesScript, readRulesScript]) {
      expect(await client.script('LOAD', script.lua)).toBe(script.sha1)
    }
  })
})

describe('LiveRules history and rollback', () => {
  it('keeps each version, newest first, and rolls back to an epoch as a new one', async () => {
    const fleet = newFleet('rollback')
    const [a, b] = [fleet.add(), fleet.add()]
    const limiter = createLimiter({ rules: b })
    await a.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } })
    await a.publish({ extra: { windows: [{ limit: 1, period: '1s' }] } })
    await a.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 30, period: '1m' }] }, search: null })
    await a.publish({ extra: null, search: { windows: [{ limit: 2, period: '1m' }] } })

    const versions = await b.history()
    expect(versions.map((v) => v.epoch)).toEqual([4, 3, 2, 1])
    expect(versions[2]?.changes).toEqual([
      { rule: 'extra', options: { windows: [{ limit: 1, period: '1s' }] }, previous: null },
    ])
    expect((await b.history('api')).map((v) => v.epoch)).toEqual([3, 1])

    expect(await b.rollback(2)).toEqual({ epoch: 5 })
    await b.refresh()
    expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(20)
    expect(limiter.rules.get('extra')?.windows[0]?.limit).toBe(1)
    expect(limiter.rules.get('search')?.windows[0]?.limit).toBe(5)
    const [rollback] = await b.history()
    expect(rollback).toMatchObject({ epoch: 5, rollbackOf: 2 })
    expect(rollback?.changes.map((change) => change.rule).sort()).toEqual(['api', 'extra', 'search'])

    // Back to the defaults, the rule only an override held gone.
    await a.rollback(0)
    await b.refresh()
    expect([...limiter.rules.keys()]).toEqual(['api', 'search'])
    expect(limiter.rules.get('api')?.windows[0]?.limit).toBe(10)
    await expect(b.rollback(99)).rejects.toMatchObject({ code: 'TG_INVALID_ARGUMENT', message: /at epoch 6/ })
    await limiter.close()
  })

  it('keeps the last 200 versions, and cannot roll back past them', async () => {
    const fleet = newFleet('history-cap')
    const live = fleet.add()
    for (let i = 1; i <= 201; i++) await live.publish({ api: { windows: [{ limit: i, period: '1m' }] } })
    const versions = await live.history()
    expect(versions).toHaveLength(200)
    expect(versions[199]?.epoch).toBe(2)
    await expect(live.rollback(0)).rejects.toMatchObject({
      code: 'TG_INVALID_ARGUMENT',
      message: 'cannot roll back to epoch 0: the history keeps the last 200 versions, from epoch 2',
    })
    expect(await live.rollback(1)).toEqual({ epoch: 202 })
    expect(await client.llen(`${fleet.prefix}{rules}:history`)).toBe(200)
  })
})

// A limit change keeps the counts; a change of periods or algorithm starts those windows fresh.
// A rule of one window is the case that matters: its state in Redis holds no period.
describe('LiveRules preview', () => {
  it('resolves what a publish would put in force, with the state names it would keep, and writes nothing', async () => {
    const fleet = newFleet('preview')
    const live = fleet.add()
    await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } })
    const before = await keyValues(client, fleet.prefix)
    // A counter's state name is its name and the digest of its algorithm and periods.
    const minute = [{ limit: 1, periodMs: 60_000 }]
    const api = stateNameOf({ name: 'api', algorithm: 'fixed-window', windows: minute })
    const search = stateNameOf({ name: 'search', algorithm: 'fixed-window', windows: minute })
    expect(api).toMatch(/^api@[A-Za-z0-9_-]{4}$/)
    expect([...live.preview()].map(([name, rule]) => [name, rule.stateName, rule.windows[0]?.limit])).toEqual([
      ['api', api, 20],
      ['search', search, 5],
    ])
    const next = live.preview({
      api: { algorithm: 'fixed-window', windows: [{ limit: 30, period: '1m' }] },
      search: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1h' }], parent: 'api' },
      export: { windows: [{ limit: 1, period: '1h' }], parent: 'api' },
    })
    // A new limit keeps the state name; a new period or a new rule gets its shape's own.
    expect(next.get('api')?.stateName).toBe(api)
    expect(next.get('search')?.stateName).toMatch(/^search@[A-Za-z0-9_-]{4}$/)
    expect(next.get('search')?.stateName).not.toBe(search)
    expect(next.get('export')?.stateName).toMatch(/^export@[A-Za-z0-9_-]{4}$/)
    expect(next.get('export')?.chain.map((rule) => rule.name)).toEqual(['export', 'api'])
    expect(() => live.preview({ api: null, search: { windows: [], parent: 'api' } })).toThrow(
      expect.objectContaining({
        code: 'TG_CONFIG',
        message: "rule 'search': windows must be a non-empty array, got []",
      }),
    )
    expect(await keyValues(client, fleet.prefix)).toEqual(before)
    expect(live.epoch).toBe(1)
  })

  it('without defaults, sees the published rules alone, and rolls back to none', async () => {
    const fleet = newFleet('no-defaults')
    const app = fleet.add()
    const admin = new Fleet(client, fleet.prefix, {}).add()
    try {
      await admin.refresh()
      expect(admin.preview().size).toBe(0)
      await admin.publish({ extra: { windows: [{ limit: 3, period: '1m' }] } })
      await app.refresh()
      expect([...admin.preview().keys()]).toEqual(['extra'])
      const limiter = createLimiter({ rules: app })
      expect([...limiter.rules.keys()]).toEqual(['api', 'search', 'extra'])
      await limiter.close()
      await admin.rollback(0)
      expect(admin.preview().size).toBe(0)
      expect(() => createLimiter({ rules: admin })).toThrow(/option rules must hold at least one rule/)
      await app.refresh()
      expect(app.epoch).toBe(2)
      expect([...app.preview().keys()]).toEqual(['api', 'search'])
    } finally {
      await admin.close()
    }
  })
})

describe.each(['MemoryStore', 'RedisStore', 'HybridStore'] as const)('live rules on a %s', (kind) => {
  function makeStore(clock: ManualClock, prefix: string): Store {
    if (kind === 'MemoryStore') return new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 })
    if (kind === 'RedisStore') return new RedisStore({ client, clock: clock.now, prefix })
    return new HybridStore({ client, clock: clock.now, prefix, autoSync: false })
  }

  it('keeps counts across a limit change and starts a window of another period or algorithm fresh', async () => {
    const fleet = newFleet(`shape-${kind}`)
    const live = fleet.add()
    const clock = new ManualClock(T0)
    const limiter: Limiter = createLimiter({ rules: live, store: makeStore(clock, fleet.prefix) })
    const consume = () => limiter.consume('api', 'ip:1')
    const publishApi = (algorithm: 'fixed-window' | 'sliding-window', limit: number, period: Duration) =>
      live.publish({ api: { algorithm, windows: [{ limit, period }] } })

    const stateName = () => limiter.rules.get('api')?.stateName
    const defaultState = stateName()
    expect(defaultState).toMatch(/^api@[A-Za-z0-9_-]{4}$/)
    for (let i = 0; i < 4; i++) await consume()
    await publishApi('fixed-window', 20, '1m')
    expect(stateName()).toBe(defaultState)
    expect(remaining(await consume())).toEqual([15])
    await publishApi('fixed-window', 20, '30s')
    expect(remaining(await consume())).toEqual([19])
    const halfMinuteState = stateName()
    expect(halfMinuteState).toMatch(/^api@[A-Za-z0-9_-]{4}$/)
    expect(halfMinuteState).not.toBe(defaultState)
    await publishApi('sliding-window', 20, '30s')
    expect(stateName()).not.toBe(halfMinuteState)
    expect(remaining(await consume())).toEqual([19])
    // Back to the default's shape: the counts it left, not yet expired.
    await live.publish({ api: null })
    expect(stateName()).toBe(defaultState)
    expect(remaining(await consume())).toEqual([4])
    if (limiter.store instanceof HybridStore) {
      const report = await limiter.store.syncNow()
      expect(report.error).toBeUndefined()
    }
    await limiter.close()
  })

  it('starts a bucket full when its limit changes', async () => {
    const defaults = { api: { algorithm: 'token-bucket', windows: [{ limit: 10, period: '1m' }] } } as const
    const fleet = newFleet(`bucket-${kind}`, defaults)
    const live = fleet.add()
    const clock = new ManualClock(T0)
    const limiter = createLimiter({ rules: live, store: makeStore(clock, fleet.prefix) })
    await limiter.consume('api', 'ip:1', { cost: 6 })
    await live.publish({ api: { algorithm: 'token-bucket', windows: [{ limit: 8, period: '1m' }] } })
    expect(remaining(await limiter.consume('api', 'ip:1'))).toEqual([7])
    await limiter.close()
  })
})

/** A store that holds every request until `release()`, then answers them from `inner`. */
class HeldStore implements Store {
  private readonly held: Array<{ request: StoreRequest; resolve: (result: StoreResult) => void }> = []

  constructor(private readonly inner: MemoryStore) {}

  evaluate(request: StoreRequest): Promise<StoreResult> {
    return new Promise((resolve) => this.held.push({ request, resolve }))
  }

  release(): void {
    for (const { request, resolve } of this.held.splice(0)) resolve(this.inner.evaluateSync(request))
  }

  reset(): Promise<void> {
    return Promise.resolve()
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}
