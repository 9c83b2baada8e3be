import { readdirSync } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LiveRules, type LiveRulesOptions, type RulesOptions } from '../src/index.js'
import { ChangedOverrides } from '../src/live-rules/changed-overrides.js'
import { rollbackChanges, versionOf } from '../src/live-rules/history.js'
import {
  applyStored,
  mergedRules,
  type Override,
  type Overrides,
  overrideOf,
  survivesJson,
} from '../src/live-rules/overrides.js'
import { publishPayloadOf } from '../src/live-rules/redis-rules.js'
import { LiveRuleSet } from '../src/live-rules/rule-set.js'
import { readSnapshot, writeSnapshot } from '../src/live-rules/snapshot.js'
import { LiveWindowLists } from '../src/live-rules/window-lists.js'
import { type Rule, type RuleOptions, resolveRules } from '../src/rules/rules.js'

const defaults = {
  api: { windows: [{ limit: 100, period: '1m' }] },
  search: { windows: [{ limit: 10, period: '1m' }], parent: 'api' },
} satisfies RulesOptions

const resolve = (overrides: Overrides) => resolveRules(mergedRules(defaults, overrides), () => {}, false)
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
    const merged = mergedRules(defaults, overrides({ ['__proto__']: { windows: [{ limit: 1, period: '1s' }] } }))
    expect(Object.keys(merged)).toEqual(['api', 'search', '__proto__'])
    expect(resolveRules(merged, () => {}, false).get('__proto__')?.windows[0]?.limit).toBe(1)
  })
})

/** A small deterministic generator (a linear congruential one), so that a failure replays. */
function seeded(seed: number): (below: number) => number {
  let state = seed >>> 0
  return (below) => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0
    return state % below
  }
}

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
        const random = seeded(seed)
        let set = LiveRuleSet.of(defaults, names)
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
    const set = LiveRuleSet.of(defaults, names)
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
    const set = LiveRuleSet.of(defaults, names)
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
    const random = seeded(7)
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
    resolveRules({ ...defaults, [name]: options }, () => {}, false, names).get(name)?.stateName
  const inCode = (name: string, options: unknown) =>
    resolveRules({ ...defaults, [name]: options }, () => {}, false).get(name)?.stateName

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
    const first = resolveRules(defaults, () => {}, false, names)
    const second = resolveRules(
      { ...defaults, search: { windows: [{ limit: 10, period: '1m' }] } },
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
  let client: Redis
  beforeAll(() => {
    client = new Redis({ lazyConnect: true, enableOfflineQueue: false })
  })
  afterAll(() => {
    client.disconnect()
  })

  const cases: Array<[string, (client: Redis) => unknown, string]> = [
    [
      'no client',
      () => ({ defaults }),
      'LiveRules option client must be an ioredis Redis or Cluster client, got undefined',
    ],
    [
      'invalid defaults',
      (c) => ({ client: c, defaults: { api: { windows: [] } } }),
      "rule 'api': windows must be a non-empty array, got []",
    ],
    [
      'a poll interval in seconds',
      (c) => ({ client: c, defaults, pollIntervalMs: 1 }),
      'LiveRules option pollIntervalMs must be 0 (no polling) or an integer from 10 to 2147483647 milliseconds, got 1',
    ],
    [
      'a prefix with a brace',
      (c) => ({ client: c, defaults, prefix: 'a{b' }),
      `option prefix must be a string of at most 64 characters without '{' or '}' (they would break Cluster hash tags), got "a{b"`,
    ],
    [
      'an empty snapshot path',
      (c) => ({ client: c, defaults, snapshotPath: '' }),
      'LiveRules option snapshotPath must be a file path, got ""',
    ],
    [
      'an unknown option',
      (c) => ({ client: c, defaults, poll: 5 }),
      "LiveRules options: unknown option 'poll'; known options are 'client', 'closeClient', 'defaults', 'prefix', 'pollIntervalMs', 'snapshotPath', 'onWarning', 'nudges'",
    ],
    [
      'nudges that are not a boolean',
      (c) => ({ client: c, defaults, nudges: 'yes' }),
      'LiveRules option nudges must be a boolean, got "yes"',
    ],
  ]

  it.each(cases)('refuses %s with TG_CONFIG, naming the option and value', (_what, options, message) => {
    expect(() => new LiveRules(options(client) as LiveRulesOptions)).toThrow(
      expect.objectContaining({ code: 'TG_CONFIG', message }),
    )
  })
})
