import { createLimiter, LiveRules, loadRules, RedisStore, type RuleOptions, stateNameOf } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { cliPrefix, rulesDirectory, runCli } from '../src/cli-runner.js'
import { ManualClock } from '../src/manual-clock.js'
import { keysWithTtl, keyValues } from '../src/redis-keys.js'

const T0 = 1_700_000_000_000

const DEFAULTS = `
limits:
  - name: api
    algorithm: fixed-window
    config:
      - { limit: 600, period: 60 }
  - name: api.export
    parent: api
    config:
      - { limit: 10, period: 3600 }
`
// api: a higher limit (its counts kept); api.export unchanged; search: new, under api.
const CHANGE = `
limits:
  - name: api
    algorithm: fixed-window
    config:
      - { limit: 1000, period: 60 }
  - name: api.export
    parent: api
    config:
      - { limit: 10, period: 3600 }
  - name: search
    algorithm: gcra
    parent: api
    config:
      - { limit: 20, period: 1 }
`
// api.export: another period, so its state starts fresh.
const RESHAPE = `
limits:
  - name: api.export
    parent: api
    config:
      - { limit: 10, period: 1800 }
`

let client: Redis
let url: string
let files: ReturnType<typeof rulesDirectory>
const prefixes: string[] = []
beforeAll(() => {
  url = inject('redisUrl')
  client = new Redis(url)
  files = rulesDirectory()
})
// Live rules' keys have no TTL (they are configuration): each test's are deleted after it.
afterEach(async () => {
  for (const prefix of prefixes.splice(0)) {
    const keys = (await keysWithTtl(client, `${prefix}{rules}:`)).map((entry) => entry.key)
    if (keys.length > 0) await client.del(...keys)
  }
})
afterAll(async () => {
  files.remove()
  await client.quit()
})

function fleet(name: string) {
  const prefix = cliPrefix(name)
  prefixes.push(prefix)
  const defaults = files.write(`${name}-defaults.yaml`, DEFAULTS)
  const cli = (...args: string[]) => runCli(['--redis', url, '--prefix', prefix, '--rules', defaults, ...args])
  /** A process of the application, following the live rules over the same defaults. */
  const process = () =>
    new LiveRules({ client, defaults: loadRules(defaults), prefix, pollIntervalMs: 0, nudges: false })
  return { prefix, defaults, cli, process }
}

describe('tollgate rules', () => {
  it('diff, publish, history and rollback round trip, as every process sees them', async () => {
    const { prefix, cli, process } = fleet('round-trip')
    const change = files.write('change.yaml', CHANGE)
    const app = process()
    // One fixed time: a minute's window that ended between the consume and the peek, the CLI's
    // processes run between them, would read as counts lost.
    const clock = new ManualClock(T0)
    const limiter = createLimiter({ rules: app, store: new RedisStore({ client, prefix, clock: clock.now }) })
    await limiter.consume('api', 'ip:1')

    const diff = await cli('--json', 'rules', 'diff', change)
    expect(diff.code, diff.stderr).toBe(0)
    expect(JSON.parse(diff.stdout).changes.map((c: Record<string, unknown>) => [c.rule, c.change, c.state])).toEqual([
      ['api', 'changed', 'kept'],
      ['api.export', 'unchanged', 'kept'],
      ['search', 'added', 'fresh'],
    ])
    expect(await keysWithTtl(client, `${prefix}{rules}:`)).toEqual([])

    const published = await cli('--json', 'rules', 'publish', change, '--yes')
    expect(published.code, published.stderr).toBe(0)
    expect(JSON.parse(published.stdout)).toMatchObject({ published: true, epoch: 1, previousEpoch: 0 })
    await app.refresh()
    expect(app.epoch).toBe(1)
    expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 1000, periodMs: 60_000 }])
    expect(limiter.rules.get('search')?.parent).toBe('api')
    // A higher limit keeps the counts: the consume before the publish still counts.
    expect((await limiter.peek('api', 'ip:1', { cost: 0 })).windows[0]?.remaining).toBe(999)

    const again = await cli('--json', 'rules', 'diff', change)
    expect(JSON.parse(again.stdout).changes.every((c: { change: string }) => c.change === 'unchanged')).toBe(true)
    const noop = await cli('--json', 'rules', 'publish', change)
    expect(noop.code, noop.stderr).toBe(0)
    expect(JSON.parse(noop.stdout)).toMatchObject({ published: false, epoch: 1 })

    const history = await cli('--json', 'rules', 'history')
    expect(history.code, history.stderr).toBe(0)
    const [version] = JSON.parse(history.stdout).versions
    expect(version.epoch).toBe(1)
    expect(version.changes.map((c: { rule: string; previous: unknown }) => [c.rule, c.previous])).toEqual([
      ['api', null],
      ['search', null],
    ])
    expect(JSON.parse((await cli('--json', 'rules', 'history', 'api.export')).stdout).versions).toEqual([])
    // Windows as `rules list` writes them, whatever period text was published (it printed 1000/60s).
    const told = await cli('rules', 'history')
    expect(told.stdout).toMatch(/^.*api +default → fixed-window 1000\/1m *$/m)
    // search has no default in the application's rules: none before its publish, as after a rollback.
    expect(told.stdout).toMatch(/^.*search +none → gcra 20\/1s parent api.*$/m)

    const list = await cli('rules', 'list')
    expect(list.stdout).toMatch(/^live rules under "cli:round-trip:.*" at epoch 1 \(defaults from .*\)$/m)
    expect(list.stdout).toMatch(/^api +fixed-window +1000\/1m +- +epoch 1 *$/m)
    expect(list.stdout).toMatch(/^api\.export +sliding-log +10\/1h +api +default *$/m)
    expect(list.stdout).toMatch(/^search +gcra +20\/1s +api +epoch 1 *$/m)

    const rolledBack = await cli('--json', 'rules', 'rollback', '0', '--yes')
    expect(rolledBack.code, rolledBack.stderr).toBe(0)
    expect(JSON.parse(rolledBack.stdout)).toEqual({ rolledBack: true, epoch: 2, previousEpoch: 1, rollbackOf: 0 })
    await app.refresh()
    expect(app.epoch).toBe(2)
    expect([...limiter.rules.keys()]).toEqual(['api', 'api.export'])
    expect(limiter.rules.get('api')?.windows).toEqual([{ limit: 600, periodMs: 60_000 }])
    const last = JSON.parse((await cli('--json', 'rules', 'history')).stdout).versions[0]
    expect(last).toMatchObject({ epoch: 2, rollbackOf: 0 })
    const afterRollback = await cli('rules', 'history')
    expect(afterRollback.stdout).toMatch(/^ *2 .*search +gcra 20\/1s parent api → none +rollback to epoch 0 *$/m)
    expect(afterRollback.stdout).toMatch(/^ *2 .*api +fixed-window 1000\/1m → default +rollback to epoch 0 *$/m)
    await limiter.close()
    await app.close()
  })

  it('says which rules a publish would start fresh', async () => {
    const { cli } = fleet('reshape')
    const run = await cli('rules', 'diff', files.write('reshape.yaml', RESHAPE))
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toMatch(/^~ +api\.export +changed +windows 10\/1h → 10\/30m +starts fresh$/m)
    expect(run.stdout).toMatch(/^1 rule to publish, 0 unchanged$/m)
  })

  it('publish and rollback refuse without a terminal and without --yes: exit 2, nothing written', async () => {
    const { prefix, cli } = fleet('unconfirmed')
    const change = files.write('unconfirmed.yaml', CHANGE)
    const publish = await cli('rules', 'publish', change)
    expect(publish.code).toBe(2)
    expect(publish.stderr).toContain('error TG_UNCONFIRMED: rules publish needs confirmation')
    expect(await keysWithTtl(client, `${prefix}{rules}:`)).toEqual([])

    expect((await cli('rules', 'publish', change, '--yes')).code).toBe(0)
    const before = await keyValues(client, `${prefix}{rules}:`)
    const rollback = await cli('rules', 'rollback', '0')
    expect(rollback.code).toBe(2)
    expect(rollback.stderr).toContain('error TG_UNCONFIRMED: rules rollback needs confirmation')
    expect(await keyValues(client, `${prefix}{rules}:`)).toEqual(before)
  })

  it('publish --expected-epoch fails with TG_CONFLICT (exit 1) when another publish came first', async () => {
    const { prefix, cli, process } = fleet('conflict')
    const other = process()
    await other.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 700, period: '1m' }] } })
    const before = await keyValues(client, `${prefix}{rules}:`)
    const run = await cli('rules', 'publish', files.write('conflict.yaml', CHANGE), '--expected-epoch', '0', '--yes')
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('error TG_CONFLICT: the live rules are at epoch 1, not 0')
    expect(await keyValues(client, `${prefix}{rules}:`)).toEqual(before)
    await other.close()
  })

  it('get prints a rule as a rules file that validate and publish take back', async () => {
    const { cli } = fleet('get')
    const run = await cli('rules', 'get', 'api.export')
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toBe(
      [
        'limits:',
        '  - name: api.export',
        '    algorithm: sliding-log',
        '    parent: api',
        '    config:',
        '      - { limit: 10, period: 1h }',
        '',
      ].join('\n'),
    )
    expect(loadRules(run.stdout)).toEqual({
      'api.export': { algorithm: 'sliding-log', parent: 'api', windows: [{ limit: 10, period: '1h' }] },
    })
  })
})

describe('tollgate rules with by and overrides', () => {
  const TENANTS = `
limits:
  - name: user
    by: [user]
    parent: org
    config:
      - { limit: 3, period: 60 }
  - name: org
    by: [org]
    config:
      - { limit: 5, period: 60 }
    overrides:
      'org:acme': { config: [{ limit: 50, period: 60 }] }
      'org:*-test': { config: [{ limit: 1, period: 60 }] }
  - name: login
    block: { for: 900, after: 3, factor: 2, max: 86400 }
    config:
      - { limit: 5, period: 900 }
`

  it('lists, gets back and diffs them', async () => {
    const { cli } = fleet('tenants')
    const tenants = files.write('tenants.yaml', TENANTS)
    const published = await cli('rules', 'publish', tenants, '--yes')
    expect(published.code, published.stderr).toBe(0)

    const list = await cli('--json', 'rules', 'list')
    expect(list.code, list.stderr).toBe(0)
    const org = JSON.parse(list.stdout).rules.find((rule: { name: string }) => rule.name === 'org')
    expect([org.by, org.overrides.map((o: { key: string; windows: unknown }) => [o.key, o.windows])]).toEqual([
      ['org'],
      [
        ['org:acme', [{ limit: 50, periodMs: 60_000 }]],
        ['org:*-test', [{ limit: 1, periodMs: 60_000 }]],
      ],
    ])
    const table = await cli('rules', 'list')
    expect(table.stdout).toMatch(/org .*by org; org:acme: 50\/1m; org:\*-test: 1\/1m/)
    expect(table.stdout).toMatch(/user .*by user/)
    expect(table.stdout).toMatch(/login .*block: 15m after 3, ×2 up to 1d/)
    const login = await cli('rules', 'get', 'login')
    expect(loadRules(login.stdout).login?.block).toEqual({ for: '15m', after: 3, factor: 2, max: '1d' })

    const got = await cli('rules', 'get', 'org')
    const resolved = (rules: ReturnType<typeof loadRules>) => {
      const rule = createLimiter({ rules }).rules.get('org')
      return [rule?.windows, rule?.by, rule?.overrides?.list]
    }
    expect(resolved(loadRules(got.stdout))).toEqual(resolved({ org: loadRules(TENANTS).org as RuleOptions }))
    const unchanged = await cli('--json', 'rules', 'diff', tenants)
    expect(JSON.parse(unchanged.stdout).changes.map((c: { change: string }) => c.change)).toEqual(
      expect.not.arrayContaining(['changed']),
    )
    const raised = files.write('raised.yaml', TENANTS.replace('limit: 50', 'limit: 80'))
    const diff = await cli('rules', 'diff', raised)
    expect(diff.stdout).toContain('overrides org:acme 50/1m; org:*-test 1/1m → org:acme 80/1m; org:*-test 1/1m')
  })
})

describe('tollgate rules validate', () => {
  it('rejects a bad file with exit 1 and the TG_CONFIG message, without Redis', async () => {
    const bad = files.write('bad.yaml', 'limits:\n  - name: api\n    config:\n      - { limit: 0, period: 60 }\n')
    const run = await runCli(['rules', 'validate', bad])
    expect(run.code).toBe(1)
    expect(run.stderr).toContain("error TG_CONFIG: rule 'api', window 0: limit must be a positive integer, got 0")
    expect(run.stdout).toBe(`${bad}: invalid\n`)
    const json = await runCli(['--json', 'rules', 'validate', bad])
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toEqual({
      file: bad,
      valid: false,
      error: { code: 'TG_CONFIG', message: "rule 'api', window 0: limit must be a positive integer, got 0" },
    })
  })

  it('accepts a good file and lists the warnings createLimiter gives', async () => {
    const file = files.write(
      'never-binds.yaml',
      'limits:\n  - name: api\n    config:\n      - { limit: 100, period: 60 }\n      - { limit: 50, period: 3600 }\n',
    )
    const run = await runCli(['--json', 'rules', 'validate', file])
    expect(run.code, run.stderr).toBe(0)
    const result = JSON.parse(run.stdout)
    const windows = [
      { limit: 100, periodMs: 60_000 },
      { limit: 50, periodMs: 3_600_000 },
    ]
    expect(result).toMatchObject({
      valid: true,
      rules: [{ name: 'api', stateName: stateNameOf({ name: 'api', algorithm: 'sliding-log', windows }) }],
    })
    expect(result.warnings).toEqual([
      {
        code: 'TG_WINDOW_NEVER_BINDS',
        message: expect.stringContaining("rule 'api': window 100 per 60000 ms can never bind beside 50 per 3600000 ms"),
      },
    ])
  })
})
