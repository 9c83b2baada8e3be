import { once } from 'node:events'
import { readdirSync } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  createLimiter,
  type Decision,
  type Duration,
  HybridStore,
  type Limiter,
  LiveRules,
  type LiveRulesOptions,
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
import { ChangedOverrides } from '../../packages/core/src/live-rules/changed-overrides.js'
import { rollbackChanges, versionOf } from '../../packages/core/src/live-rules/history.js'
import {
  applyStored,
  mergedRules,
  type Override,
  type Overrides,
  overrideOf,
  survivesJson,
} from '../../packages/core/src/live-rules/overrides.js'
import { publishPayloadOf } from '../../packages/core/src/live-rules/redis-rules.js'
import { LiveRuleSet } from '../../packages/core/src/live-rules/rule-set.js'
import { readSnapshot, writeSnapshot } from '../../packages/core/src/live-rules/snapshot.js'
import { LiveWindowLists } from '../../packages/core/src/live-rules/window-lists.js'
import { type Rule, type RuleOptions, resolveRules } from '../../packages/core/src/rules/rules.js'
import { publishRulesScript, readRulesScript } from '../../packages/core/src/scripts/generated.js'
import { DEFAULTS, Fleet, livePrefix } from '../src/live-rules-fixtures.js'
import { ManualClock } from '../src/manual-clock.js'
import { pollUntil } from '../src/poll.js'
import { keyValues } from '../src/redis-keys.js'
import { seededRandom } from '../src/seeded-random.js'

const resolve = (overrides: Overrides) => resolveRules(mergedRules(DEFAULTS, overrides), () => {}, false)
const overrides = (entries: Record<string, unknown>): Overrides =>
  new Map(Object.entries(entries).map(([name, options]) => [name, overrideOf(options as never)]))

describe('applyStored', () => {
  it('takes the changes of one publish together when each alone would not resolve', () => {
    const applied = applyStored(
      new Map(),
      [
        { rule: 'search', text: '{"windows":[{"limit":5,"period":"1m"}],"parent":"tenant"}', epoch: 1 },
        { rule: 'tenant', text: '{"windows":[{"limit":50,"period":"1h"}]}', epoch: 1 },
      ],
      resolve,
    )
    expect(applied.rejections).toEqual([])
    expect(applied.changed).toEqual(['search', 'tenant'])
    expect(applied.resolved?.get('search')?.chain.map((rule) => rule.name)).toEqual(['search', 'tenant'])
  })

  it('leaves out only what cannot resolve, keeping that rule as it was', () => {
    const base = overrides({ api: { windows: [{ limit: 7, period: '1m' }] } })
    const applied = applyStored(
      base,
      [
        { rule: 'api', text: '{"windows":[{"limit":0,"period":"1m"}]}', epoch: 4 },
        { rule: 'search', text: '{"windows":[{"limit":3,"period":"1m"}],"parent":"api"}', epoch: 4 },
        { rule: 'broken', text: '{"windows":', epoch: 4 },
      ],
      resolve,
    )
    expect(applied.overrides.get('api')?.options).toEqual({ windows: [{ limit: 7, period: '1m' }] })
    expect(applied.overrides.get('search')?.options).toEqual({ windows: [{ limit: 3, period: '1m' }], parent: 'api' })
    expect(applied.changed).toEqual(['search'])
    expect(applied.accepted).toEqual(['search'])
    expect(applied.rejections).toEqual([
      { rule: 'api', epoch: 4, message: "rule 'api', window 0: limit must be a positive integer, got 0" },
      { rule: 'broken', epoch: 4, message: expect.stringMatching(/^the stored options are not JSON: /) },
    ])
  })

  it('keeps a drop that would orphan a child, and reports nothing changed for what is already in force', () => {
    const base = overrides({
      tenant: { windows: [{ limit: 50, period: '1h' }] },
      search: { windows: [{ limit: 5, period: '1m' }], parent: 'tenant' },
    })
    const applied = applyStored(
      base,
      [
        { rule: 'tenant', text: null, epoch: 9 },
        { rule: 'search', text: '{"windows":[{"limit":5,"period":"1m"}],"parent":"tenant"}', epoch: 9 },
      ],
      resolve,
    )
    expect([...applied.overrides.keys()]).toEqual(['tenant', 'search'])
    expect(applied.changed).toEqual([])
    expect(applied.resolved).toBeUndefined()
    expect(applied.rejections).toEqual([
      { rule: 'tenant', epoch: 9, message: "rule 'search': unknown parent 'tenant'" },
    ])
  })

  it('treats a rule named __proto__ as any other', () => {
    const merged = mergedRules(DEFAULTS, overrides({ ['__proto__']: { windows: [{ limit: 1, period: '1s' }] } }))
    expect(Object.keys(merged)).toEqual(['api', 'search', '__proto__'])
    expect(resolveRules(merged, () => {}, false).get('__proto__')?.windows[0]?.limit).toBe(1)
  })
})

/** What a resolved rule is, its chain by name, and whether its chain links the set's own rules. */
function described(rules: ReadonlyMap<string, Rule>): unknown[] {
  return [...rules.values()].map((rule) => ({
    ...rule,
    chain: rule.chain.map((link) => link.name),
    linked: rule.chain.every((link) => rules.get(link.name) === link),
  }))
}

function outcome(resolve: () => ReadonlyMap<string, Rule>): unknown {
  try {
    return { rules: described(resolve()) }
  } catch (error) {
    return { error: (error as Error).message }
  }
}

describe('LiveRuleSet', () => {
  const names = new LiveWindowLists()
  const rule = (random: (below: number) => number, names: readonly string[]): RuleOptions | null => {
    if (random(5) === 0) return null
    const parent = random(3) === 0 ? names[random(names.length)] : undefined
    return {
      algorithm: random(2) === 0 ? 'fixed-window' : 'token-bucket',
      windows: [{ limit: 1 + random(3), period: random(2) === 0 ? '1m' : '1h' }],
      ...(parent === undefined ? {} : { parent }),
      ...(random(6) === 0 ? { dryRun: random(2) === 0 } : {}),
    }
  }

  it('resolves a set made by changes as resolveRules resolves the whole set, or throws what it throws', () => {
    const ruleNames = ['api', 'search', 'a', 'b', 'c', 'd', 'e']
    for (const dryRun of [false, true]) {
      for (let seed = 1; seed <= 60; seed++) {
        const random = seededRandom(seed)
        let set = LiveRuleSet.of(DEFAULTS, names)
        set.resolve(() => {}, dryRun)
        for (let step = 0; step < 30; step++) {
          // One change per rule, as a publish or a read makes them.
          const changes = new Map<string, Override | null>()
          for (let i = 1 + random(3); i > 0; i--) {
            const options = rule(random, ruleNames)
            changes.set(ruleNames[random(ruleNames.length)] as string, options === null ? null : overrideOf(options))
          }
          const next = set.with([...changes])
          const expected = outcome(() => resolveRules(next.options, () => {}, dryRun, names))
          const found = outcome(() => next.resolve(() => {}, dryRun))
          expect(found, `dryRun ${dryRun}, seed ${seed}, step ${step}`).toEqual(expected)
          // As a process would: a set its followers cannot take is not the next one's base.
          if ('rules' in (found as object)) set = next
        }
      }
    }
  })

  it('warns of the rules it resolves again, as resolveRules would of them', () => {
    const set = LiveRuleSet.of(DEFAULTS, names)
    set.resolve(() => {}, false)
    const warnings: string[] = []
    set
      .with([['api', overrideOf({ windows: [{ limit: 5, period: 500 }] })]])
      .resolve((_message, code) => warnings.push(code), false)
    expect(warnings).toEqual(['TG_PERIOD_IN_MS'])
  })

  it('finds the rules that pass a test again only among the rules it resolved again', () => {
    const sheds = (rule: Rule) =>
      rule.chain.some((link) => link.windows.some((window) => window.lowBurst !== undefined))
    const set = LiveRuleSet.of(DEFAULTS, names)
    set.resolve(() => {}, false)
    expect(set.rulesWhere(sheds).size).toBe(0)
    const next = set.with([['api', overrideOf({ windows: [{ limit: 100, period: '1m', lowBurst: 50 }] })]])
    const rules = next.resolve(() => {}, false)
    // The child sheds by its parent's window.
    expect([...next.rulesWhere(sheds)]).toEqual([rules.get('api'), rules.get('search')])
    expect(next.rulesWhere(sheds)).toBe(next.rulesWhere(sheds))
    const back = next.with([['api', null]])
    back.resolve(() => {}, false)
    expect(back.rulesWhere(sheds).size).toBe(0)
  })
})

describe('ChangedOverrides', () => {
  it('reads as the overrides with every change made, in the order a copied map would keep', () => {
    const random = seededRandom(7)
    let layered: Overrides = new Map()
    let copied = new Map<string, Override>()
    for (let step = 0; step < 300; step++) {
      const changes = Array.from({ length: 1 + random(4) }, () => {
        const name = `rule-${random(120)}`
        return [
          name,
          random(4) === 0 ? null : overrideOf({ windows: [{ limit: 1 + random(9), period: '1m' }] }),
        ] as const
      })
      layered = ChangedOverrides.of(layered, changes)
      copied = new Map(copied)
      for (const [name, override] of changes) {
        if (override === null) copied.delete(name)
        else copied.set(name, override)
      }
      expect(layered.size).toBe(copied.size)
      expect(layered.get('rule-3')).toBe(copied.get('rule-3'))
      expect(layered.has('rule-4')).toBe(copied.has('rule-4'))
    }
    expect([...layered]).toEqual([...copied])
    expect([...layered.keys()]).toEqual([...copied.keys()])
  })
})

describe('publishing', () => {
  it('sends the changes as one argument, refusing more than one publish carries with the size and the bound', () => {
    const changes = [
      ['api', overrideOf({ windows: [{ limit: 5, period: '1m' }] })],
      ['search', null],
    ] as const
    expect(JSON.parse(publishPayloadOf(changes))).toEqual([
      'api',
      '{"windows":[{"limit":5,"period":"1m"}]}',
      'search',
      '',
    ])
    expect(() => publishPayloadOf(changes, 40)).toThrow(
      expect.objectContaining({
        code: 'TG_CONFIG',
        message:
          'publish of 2 rules carries 48 characters of rule names and options; one publish carries at most 40: publish them in several parts',
      }),
    )
  })

  it('tells options that JSON keeps from options it would drop or change', () => {
    const kept = { windows: [{ limit: 5, period: '1m' }], parent: 'api', dryRun: false }
    expect(survivesJson(kept, JSON.parse(JSON.stringify(kept)))).toBe(true)
    for (const given of [
      { windows: [{ limit: 5, period: '1m' }], algorithm: () => 'gcra' },
      { windows: [{ limit: Number.NaN, period: '1m' }] },
      { windows: [{ limit: 5, period: new Date(0) }] },
      { windows: [undefined] },
    ]) {
      expect(survivesJson(given, JSON.parse(JSON.stringify(given)))).toBe(false)
    }
  })
})

describe('state names', () => {
  const names = new LiveWindowLists()
  const stateName = (name: string, options: unknown) =>
    resolveRules({ ...DEFAULTS, [name]: options }, () => {}, false, names).get(name)?.stateName
  const inCode = (name: string, options: unknown) =>
    resolveRules({ ...DEFAULTS, [name]: options }, () => {}, false).get(name)?.stateName

  it('keeps the name of a counter whose limit changed, in code or live', () => {
    expect(stateName('api', { windows: [{ limit: 5, period: '60s' }] })).toBe(
      stateName('api', { windows: [{ limit: 100, period: '1m' }] }),
    )
    expect(inCode('api', { windows: [{ limit: 5, period: '60s' }] })).toBe(
      stateName('api', { windows: [{ limit: 9, period: '1m' }] }),
    )
    expect(inCode('api', { windows: [{ limit: 5, period: '1m' }] })).toMatch(/^api@[A-Za-z0-9_-]{4}$/)
  })

  // A rolling deploy that changed a rule's period in code, same name (5 per second → 5 per hour),
  // let processes on the old period end the new window at theirs: 30 admitted in 6 s.
  it('names apart the state of a rule whose period changed in code', () => {
    expect(inCode('api', { windows: [{ limit: 5, period: '1s' }] })).not.toBe(
      inCode('api', { windows: [{ limit: 5, period: '1h' }] }),
    )
  })

  it('names apart the state of another period, algorithm, window list, bucket limit, or rule', () => {
    const named = [
      stateName('api', { windows: [{ limit: 100, period: '30s' }] }),
      stateName('api', { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1m' }] }),
      stateName('api', {
        windows: [
          { limit: 100, period: '1m' },
          { limit: 10, period: '1s' },
        ],
      }),
      stateName('bucket', { algorithm: 'token-bucket', windows: [{ limit: 11, period: '1s' }] }),
      stateName('fresh', { windows: [{ limit: 1, period: '1s' }] }),
    ]
    for (const name of named) expect(name).toMatch(/^(api|bucket|fresh)@[A-Za-z0-9_-]{4}$/)
    expect(new Set(named).size).toBe(named.length)
    // The same shape gets the same name in every process.
    expect(stateName('api', { windows: [{ limit: 7, period: '30s' }] })).toBe(named[0])
  })

  it('gives rules one windows array per distinct list of windows', () => {
    const first = resolveRules(DEFAULTS, () => {}, false, names)
    const second = resolveRules(
      { ...DEFAULTS, search: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }] } },
      () => {},
      false,
      names,
    )
    expect(second.get('api')?.windows).toBe(first.get('api')?.windows)
    expect(second.get('search')?.windows).toBe(first.get('search')?.windows)
  })
})

describe('rollbackChanges', () => {
  const version = (epoch: number, changes: Array<[string, unknown, unknown]>) =>
    versionOf(
      JSON.stringify({
        epoch,
        publishedAtMs: 1,
        changes: changes.map(([rule, options, previous]) => ({
          rule,
          options: options === null ? null : JSON.stringify(options),
          previous: previous === null ? null : typeof previous === 'string' ? previous : JSON.stringify(previous),
        })),
      }),
    )!

  it('gives each rule changed since the override it had before the earliest change', () => {
    const versions = [
      version(3, [['api', { windows: [3] }, { windows: [2] }]]),
      version(2, [
        ['api', { windows: [2] }, { windows: [1] }],
        ['x', null, { windows: [9] }],
      ]),
      version(1, [['api', { windows: [1] }, null]]),
    ]
    expect(rollbackChanges(versions, 1, 3)).toEqual([
      ['api', { windows: [1] }],
      ['x', { windows: [9] }],
    ])
    expect(rollbackChanges(versions, 0, 3)).toEqual([
      ['api', null],
      ['x', { windows: [9] }],
    ])
  })

  it('refuses an epoch whose rule set the history cannot rebuild', () => {
    const versions = [version(5, [['api', null, 'not json']]), version(3, [['api', null, null]])]
    expect(() => rollbackChanges(versions, 2, 5)).toThrow(
      'cannot roll back to epoch 2: epoch 4 is not in the history (written around LiveRules), so the rule set of epoch 2 is not known',
    )
    // A stored text that was not JSON comes back as it was, for the publish to refuse.
    expect(rollbackChanges(versions, 4, 5)).toEqual([['api', 'not json']])
  })

  it('reads nothing from an entry that is not one publish_rules.lua writes', () => {
    expect(versionOf('{"epoch":"2"}')).toBeUndefined()
    expect(versionOf('nope')).toBeUndefined()
    expect(versionOf('{"epoch":2,"publishedAtMs":5,"rollbackOf":1,"changes":[]}')).toEqual({
      epoch: 2,
      publishedAtMs: 5,
      rollbackOf: 1,
      changes: [],
    })
  })
})

describe('snapshots', () => {
  let directory: string
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'tollgate-snapshot-'))
  })
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true })
  })

  it('writes through a file renamed into place, and reads back the overrides of its epoch and prefix', async () => {
    const path = join(directory, 'rules.json')
    expect(readSnapshot(path, 'tg:')).toBeUndefined()
    await writeSnapshot(path, 'tg:', 7, 'c0ffee', overrides({ api: { windows: [{ limit: 9, period: '1m' }] } }))
    expect(readdirSync(directory)).toEqual(['rules.json'])
    expect(readSnapshot(path, 'tg:')).toEqual({
      epoch: 7,
      publishId: 'c0ffee',
      rules: [{ rule: 'api', text: '{"windows":[{"limit":9,"period":"1m"}]}', epoch: 7 }],
    })
    expect(() => readSnapshot(path, 'other:')).toThrow('it holds the rules of prefix "tg:", not "other:"')
  })

  it('leaves the last whole snapshot when a write fails', async () => {
    const path = join(directory, 'kept.json')
    await writeSnapshot(path, 'tg:', 1, 'a', new Map())
    // A directory where the temporary file goes: writing it fails, as a full disk would. A write
    // made in place would not go there, and would succeed.
    const temporary = `${path}.${process.pid}.tmp`
    await mkdir(temporary)
    await expect(writeSnapshot(path, 'tg:', 2, 'b', new Map())).rejects.toMatchObject({ code: 'EISDIR' })
    expect(readSnapshot(path, 'tg:')?.epoch).toBe(1)
    await rm(temporary, { recursive: true })
    await writeSnapshot(path, 'tg:', 2, 'b', new Map())
    expect(readSnapshot(path, 'tg:')?.epoch).toBe(2)
  })
})

describe('LiveRules options', () => {
  // Never connected: every option is checked before any I/O, and a bad one starts nothing.
  let offline: Redis
  beforeAll(() => {
    offline = new Redis({ lazyConnect: true, enableOfflineQueue: false })
  })
  afterAll(() => {
    offline.disconnect()
  })

  const cases: Array<[string, (client: Redis) => unknown, string]> = [
    [
      'no client',
      () => ({ defaults: DEFAULTS }),
      'LiveRules option client must be an ioredis (or iovalkey) Redis or Cluster client, or a node-redis client (createClient, createCluster or createSentinel), got undefined',
    ],
    [
      'invalid defaults',
      (c) => ({ client: c, defaults: { api: { windows: [] } } }),
      "rule 'api': windows must be a non-empty array, got []",
    ],
    [
      'a poll interval in seconds',
      (c) => ({ client: c, defaults: DEFAULTS, pollIntervalMs: 1 }),
      'LiveRules option pollIntervalMs must be 0 (no polling) or an integer from 10 to 2147483647 milliseconds, got 1',
    ],
    [
      'a prefix with a brace',
      (c) => ({ client: c, defaults: DEFAULTS, prefix: 'a{b' }),
      `option prefix must be a string of at most 64 characters without '{' or '}' (they would break Cluster hash tags), got "a{b"`,
    ],
    [
      'an empty snapshot path',
      (c) => ({ client: c, defaults: DEFAULTS, snapshotPath: '' }),
      'LiveRules option snapshotPath must be a file path, got ""',
    ],
    [
      'an unknown option',
      (c) => ({ client: c, defaults: DEFAULTS, poll: 5 }),
      "LiveRules options: unknown option 'poll'; known options are 'client', 'closeClient', 'defaults', 'prefix', 'pollIntervalMs', 'snapshotPath', 'onWarning', 'nudges'",
    ],
    [
      'nudges that are not a boolean',
      (c) => ({ client: c, defaults: DEFAULTS, nudges: 'yes' }),
      'LiveRules option nudges must be a boolean, got "yes"',
    ],
  ]

  it.each(cases)('refuses %s with TG_CONFIG, naming the option and value', (_what, options, message) => {
    expect(() => new LiveRules(options(offline) as LiveRulesOptions)).toThrow(
      expect.objectContaining({ code: 'TG_CONFIG', message }),
    )
  })
})

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

  it("brings a customer's override to every process, which then decides it with no command of its own", async () => {
    const fleet = newFleet('overrides')
    const clock = new ManualClock(T0)
    const [a, b] = [fleet.add(), fleet.add()]
    const store = () => new RedisStore({ client, clock: clock.now, prefix: fleet.prefix })
    const [limiterA, limiterB] = [a, b].map((live) => createLimiter({ rules: live, store: store() })) as [
      Limiter,
      Limiter,
    ]
    await limiterA.consume('api', 'org:acme', { cost: 3 })
    await a.publish({
      api: {
        algorithm: 'fixed-window',
        windows: [{ limit: 10, period: '1m' }],
        overrides: {
          'org:acme': { windows: [{ limit: 50, period: '1m' }] },
          'org:*-test': { windows: [{ limit: 1, period: '1m' }] },
        },
      },
    })
    await b.refresh()
    // Same periods as the rule: acme keeps the 3 it had used, under its new limit.
    expect([limits(await limiterB.peek('api', 'org:acme')), remaining(await limiterB.peek('api', 'org:acme'))]).toEqual(
      [[50], [47]],
    )
    expect(limits(await limiterB.peek('api', 'org:ci-test'))).toEqual([1])
    expect(limits(await limiterB.peek('api', 'org:beta'))).toEqual([10])
    const sent: string[] = []
    const send = client.sendCommand.bind(client)
    client.sendCommand = (command, stream) => {
      sent.push(command.name)
      return send(command, stream)
    }
    try {
      await limiterB.consume('api', 'org:acme')
    } finally {
      client.sendCommand = send
    }
    expect(sent).toEqual(['evalsha'])
    await Promise.all([limiterA, limiterB].map((limiter) => limiter.close()))
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

  // Regression: a process that started after rules were published and dropped again emitted
  // `rules` on its first read, with an empty change list: the rules read were its own defaults.
  it('tells the rules event only of epochs that changed rules or rejected them, not of the first read', async () => {
    const fleet = newFleet('first-read')
    const publisher = fleet.add()
    await publisher.publish({ api: { windows: [{ limit: 3, period: '1m' }] } })
    await publisher.publish({ api: null })
    const live = fleet.add()
    const limiter = createLimiter({ rules: live, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const changes: RulesChange[] = []
    limiter.on('rules', (change) => changes.push(change))
    await live.refresh()
    expect(live.epoch).toBe(2)
    expect(changes).toEqual([])
    await publisher.publish({ api: { windows: [{ limit: 4, period: '1m' }] } })
    await live.refresh()
    expect(changes).toEqual([{ epoch: 3, changed: ['api'] }])
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
