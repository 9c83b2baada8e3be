import { createLimiter, type Limiter, loadRules, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { cliPrefix, rulesDirectory, runCli, runCliOnTerminal } from '../src/cli-runner.js'
import { keyValues } from '../src/redis-keys.js'
import { holdsNoState } from '../src/store-conformance.js'

// Sliding logs of an hour: what a test consumed is still counted, whole, when the CLI looks.
const RULES = `
limits:
  - name: api
    config:
      - { limit: 100, period: 3600 }
  - name: api.export
    parent: api
    config:
      - { limit: 10, period: 3600 }
      - { limit: 5, period: 600 }
`

let client: Redis
let url: string
let files: ReturnType<typeof rulesDirectory>
let rules: string
beforeAll(() => {
  url = inject('redisUrl')
  client = new Redis(url)
  files = rulesDirectory()
  rules = files.write('rules.yaml', RULES)
})
afterAll(async () => {
  files.remove()
  await client.quit()
})

/** A limiter of the rules file as an application runs it, under its own prefix, and the CLI's arguments for it. */
function app(name: string): { prefix: string; limiter: Limiter; store: RedisStore; cli: string[] } {
  const prefix = cliPrefix(name)
  const store = new RedisStore({ client, prefix })
  const limiter = createLimiter({ rules: loadRules(rules), store })
  return { prefix, limiter, store, cli: ['--redis', url, '--prefix', prefix, '--rules', rules] }
}

/** The name the rule's state is kept under, in keys: `name@<digest of its shape>`. */
function stateOf(limiter: Limiter, rule: string): string {
  return limiter.rules.get(rule)?.stateName as string
}

const IP = 'ip:203.0.113.7'
const USER = 'user:42'

describe('tollgate inspect', () => {
  it('shows every window of the rule and its parents, with used, remaining, the key and its TTL, and charges nothing', async () => {
    const { limiter, store, prefix, cli } = app('inspect')
    for (let i = 0; i < 3; i++) await limiter.consume('api.export', [IP, USER])
    await limiter.consume('api', IP)
    const before = await keyValues(client, prefix)

    const first = await runCli([...cli, '--json', 'inspect', 'api.export', IP, USER])
    const second = await runCli([...cli, '--json', 'inspect', 'api.export', IP, USER])
    expect(first.code, first.stderr).toBe(0)
    expect(second.code, second.stderr).toBe(0)
    expect(await keyValues(client, prefix)).toEqual(before)

    const result = JSON.parse(first.stdout)
    const rows = result.windows.map((w: Record<string, unknown>) => [
      w.rule,
      w.identifier,
      w.periodMs,
      w.used,
      w.remaining,
    ])
    expect(rows).toEqual([
      ['api.export', IP, 3_600_000, 3, 7],
      ['api.export', IP, 600_000, 3, 2],
      ['api.export', USER, 3_600_000, 3, 7],
      ['api.export', USER, 600_000, 3, 2],
      ['api', IP, 3_600_000, 4, 96],
      ['api', USER, 3_600_000, 3, 97],
    ])
    const keyOf = (rule: string, identifier: string) =>
      store.keyOf({ rule: stateOf(limiter, rule), algorithm: 'sliding-log', windows: [], identifier })
    expect(result.windows.map((w: { key: string }) => w.key)).toEqual([
      keyOf('api.export', IP),
      keyOf('api.export', IP),
      keyOf('api.export', USER),
      keyOf('api.export', USER),
      keyOf('api', IP),
      keyOf('api', USER),
    ])
    for (const window of result.windows) {
      expect(window.algorithm).toBe('sliding-log')
      expect(window.ttlMs).toBeGreaterThanOrEqual(await client.pttl(window.key))
      expect(window.ttlMs).toBeLessThanOrEqual(3_600_000)
      expect(window.resetAtMs).toBeGreaterThan(result.nowMs)
    }
    // The second look saw what the first did: nothing was charged in between.
    const usage = (run: typeof first) =>
      JSON.parse(run.stdout).windows.map((w: Record<string, unknown>) => [w.used, w.remaining])
    expect(usage(second)).toEqual(usage(first))
    expect((await limiter.peek('api.export', IP, { cost: 0 })).windows.map((w) => w.remaining)).toEqual([7, 2, 96])
  })

  it('prints an aligned table for people, and no TTL for a key that holds nothing', async () => {
    const { limiter, cli } = app('inspect-table')
    await limiter.consume('api', IP)
    const run = await runCli([...cli, 'inspect', 'api', IP, 'ip:198.51.100.1'])
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.trimEnd().split('\n')
    expect(lines[1]).toMatch(/^RULE +IDENTIFIER +ALGORITHM +WINDOW +USED +REMAINING +RESET +TTL +KEY$/)
    expect(lines[2]).toMatch(/^api +ip:203\.0\.113\.7 +sliding-log +100\/1h +1 +99 +in 59m\d\ds +59m\d\ds +\S+$/)
    expect(lines[3]).toMatch(/^api +ip:198\.51\.100\.1 +sliding-log +100\/1h +0 +100 +now +- +\S+$/)
    // Aligned: left columns start where their header does, numbers end where theirs does.
    const header = lines[1] as string
    for (const row of lines.slice(2)) {
      for (const name of ['IDENTIFIER', 'ALGORITHM', 'WINDOW', 'KEY']) {
        const at = header.indexOf(name)
        expect(row.slice(at - 1, at + 1), `${name} in ${row}`).toMatch(/^ \S$/)
      }
      for (const name of ['USED', 'REMAINING', 'RESET', 'TTL']) {
        const end = header.indexOf(name) + name.length
        expect(row.slice(end - 1, end + 1), `${name} in ${row}`).toMatch(/^\S $/)
      }
    }
  })

  it('shows a block in force, with its end, and reset lifts it', async () => {
    const prefix = cliPrefix('inspect-block')
    const blocking = files.write(
      'blocking.yaml',
      'limits:\n  - name: login\n    block: { for: 3600 }\n    config:\n      - { limit: 1, period: 3600 }\n',
    )
    const limiter = createLimiter({ rules: loadRules(blocking), store: new RedisStore({ client, prefix }) })
    const cli = ['--redis', url, '--prefix', prefix, '--rules', blocking]
    await limiter.consume('login', IP)
    expect((await limiter.consume('login', IP)).reason).toBe('blocked')
    const json = await runCli([...cli, '--json', 'inspect', 'login', IP])
    expect(json.code, json.stderr).toBe(0)
    const { nowMs, blocks } = JSON.parse(json.stdout)
    expect(blocks).toEqual([
      { rule: 'login', identifier: IP, untilMs: expect.any(Number), key: expect.stringMatching(/:block$/) },
    ])
    expect(blocks[0].untilMs - nowMs).toBeGreaterThan(3_500_000)
    const table = await runCli([...cli, 'inspect', 'login', IP])
    expect(table.stdout).toMatch(/blocked: login for ip:203\.0\.113\.7 until \S+ \(in 59m\d\ds\)/)
    const reset = await runCli([...cli, 'reset', 'login', IP, '--yes'])
    expect(reset.code, reset.stderr).toBe(0)
    expect(JSON.parse((await runCli([...cli, '--json', 'inspect', 'login', IP])).stdout).blocks).toEqual([])
    // A process that kept the refusal in its refusal cache refuses for up to a second more; one without, at once.
    const another = createLimiter({ rules: loadRules(blocking), store: new RedisStore({ client, prefix }) })
    expect((await another.consume('login', IP)).reason).toBe('ok')
  })

  it('fails with TG_UNKNOWN_RULE (exit 1) for a rule the rules do not hold', async () => {
    const { cli } = app('inspect-unknown')
    const run = await runCli([...cli, 'inspect', 'api.exprot', IP])
    expect(run.code).toBe(1)
    expect(run.stderr).toContain(`error TG_UNKNOWN_RULE: no rule "api.exprot"; the rules are 'api', 'api.export'`)
    expect(run.stdout).toBe('')
  })
})

describe('tollgate reset', () => {
  it("with --yes forgets the rule's state for those identifiers, and with --parents its parents' too", async () => {
    const { limiter, store, cli } = app('reset')
    for (let i = 0; i < 2; i++) await limiter.consume('api.export', [IP, USER])
    const key = (rule: string, identifier: string) =>
      store.keyOf({ rule: stateOf(limiter, rule), algorithm: 'sliding-log', windows: [], identifier })

    const run = await runCli([...cli, 'reset', 'api.export', IP, '--yes'])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toBe(`reset api.export for ${IP}: 1 of 1 key held state\n`)
    expect(await client.exists(key('api.export', IP), key('api', IP), key('api.export', USER))).toBe(2)
    expect((await limiter.peek('api.export', IP, { cost: 0 })).windows.map((w) => w.remaining)).toEqual([10, 5, 98])

    const parents = await runCli([...cli, '--json', 'reset', 'api.export', USER, '--parents', '--yes'])
    expect(parents.code, parents.stderr).toBe(0)
    expect(JSON.parse(parents.stdout)).toEqual({
      rule: 'api.export',
      identifiers: [USER],
      rules: ['api.export', 'api'],
      keys: [key('api.export', USER), key('api', USER)],
      existed: 2,
    })
    expect(await client.exists(key('api.export', USER), key('api', USER))).toBe(0)
    expect(await client.exists(key('api', IP))).toBe(1)
  })

  it('refuses without a terminal and without --yes: exit 2, nothing deleted', async () => {
    const { limiter, prefix, cli } = app('reset-refused')
    await limiter.consume('api.export', IP)
    const before = await keyValues(client, prefix)
    const run = await runCli([...cli, 'reset', 'api.export', IP, '--parents'], { input: 'y\n' })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('error TG_UNCONFIRMED: reset needs confirmation, and stdin is not a terminal')
    expect(run.stderr).toContain('pass --yes')
    expect(run.stdout).toBe('')
    expect(await keyValues(client, prefix)).toEqual(before)
    expect(Object.keys(before)).toHaveLength(2)
  })
})

describe('confirmation on a terminal', () => {
  it('reset asks, and forgets nothing when the answer is not yes', async () => {
    const { limiter, prefix, cli } = app('terminal')
    await limiter.consume('api', IP)
    const before = await keyValues(client, prefix)
    // NO_COLOR: a terminal would otherwise get the error in red.
    const env = { NO_COLOR: '1' }
    const declined = await runCliOnTerminal([...cli, 'reset', 'api', IP], { input: 'n\n', env })
    expect(declined.code).toBe(1)
    expect(declined.stdout).toContain(`Forget the state of 'api' for ${IP} (1 key under "${prefix}")? [y/N]`)
    expect(declined.stdout).toContain('error TG_ABORTED: reset declined: nothing was changed')
    expect(await keyValues(client, prefix)).toEqual(before)

    const confirmed = await runCliOnTerminal([...cli, 'reset', 'api', IP], { input: 'y\n', env })
    expect(confirmed.code).toBe(0)
    expect(confirmed.stdout).toContain(`reset api for ${IP}: 1 of 1 key held state`)
    // What stays is the reset's operation key, which lives a minute (lua/lib/operation.lua).
    expect(Object.keys(await keyValues(client, prefix)).filter((key) => !holdsNoState(key))).toEqual([])
  })
})

describe('--json', () => {
  it('puts exactly one JSON document on stdout, for results and for failures alike', async () => {
    const { limiter, cli } = app('json')
    await limiter.consume('api', IP)
    const runs = await Promise.all([
      runCli([...cli, '--json', 'inspect', 'api', IP]),
      runCli([...cli, 'inspect', 'api', IP, '--json']),
      runCli([...cli, 'rules', 'list', '--json']),
      runCli([...cli, '--json', 'rules', 'get', 'api']),
      runCli(['--json', 'rules', 'validate', rules]),
      runCli([...cli, '--json', 'doctor']),
      runCli([...cli, '--json', 'inspect', 'nope', IP]),
      runCli([...cli, '--json', 'reset', 'api', IP]),
    ])
    for (const run of runs) expect(() => JSON.parse(run.stdout), run.stdout).not.toThrow()
    expect(runs.map((run) => run.code)).toEqual([0, 0, 0, 0, 0, 0, 1, 2])
    const counts = (stdout: string) =>
      JSON.parse(stdout).windows.map((w: Record<string, unknown>) => [w.key, w.used, w.remaining])
    expect(counts(runs[1]!.stdout)).toEqual(counts(runs[0]!.stdout))
    expect(JSON.parse(runs[2]!.stdout)).toMatchObject({
      source: 'file',
      epoch: 0,
      rules: [{ name: 'api' }, { name: 'api.export' }],
    })
    expect(JSON.parse(runs[3]!.stdout).rule).toEqual({
      name: 'api',
      algorithm: 'sliding-log',
      windows: [{ limit: 100, periodMs: 3_600_000 }],
      parent: null,
      onStoreError: null,
      dryRun: null,
      by: null,
      overrides: [],
      block: null,
      stateName: stateOf(limiter, 'api'),
    })
    expect(JSON.parse(runs[6]!.stdout)).toEqual({
      error: { code: 'TG_UNKNOWN_RULE', message: expect.stringContaining('nope') },
    })
    expect(JSON.parse(runs[7]!.stdout).error.code).toBe('TG_UNCONFIRMED')
  })
})

describe.concurrent('usage errors', () => {
  it.each([
    ['a missing argument', ['inspect', 'api']],
    ['an unknown command', ['inspekt', 'api', IP]],
    ['an unknown option', ['inspect', 'api', IP, '--frobnicate']],
    ['an epoch that is not one', ['rules', 'rollback', 'yesterday']],
    ['a URL that is not redis://', ['--redis', 'http://127.0.0.1:6379', 'doctor']],
    ['a prefix that breaks hash tags', ['--prefix', 'a{b}', 'doctor']],
  ])('exit 2 for %s, with the reason on stderr', async (_what, args) => {
    const run = await runCli(['--redis', url, ...args])
    expect(run.code, run.stderr).toBe(2)
    expect(run.stderr).toMatch(/error/)
    expect(run.stdout).toBe('')
  })

  it('exit 2 when there is no Redis to talk to, or no rules', async () => {
    const noRedis = await runCli(['inspect', 'api', IP])
    expect(noRedis.code).toBe(2)
    expect(noRedis.stderr).toContain('give --redis <url> or set REDIS_URL')
    const noRules = await runCli(['--prefix', cliPrefix('no-rules'), 'inspect', 'api', IP], { env: { REDIS_URL: url } })
    expect(noRules.code).toBe(2)
    expect(noRules.stderr).toContain('nothing is published under prefix')
  })
})

describe('colours', () => {
  it('are on on a terminal and with FORCE_COLOR, off with NO_COLOR and without a terminal', async () => {
    const { limiter, cli } = app('colours')
    await limiter.consume('api', IP)
    const args = [...cli, 'inspect', 'api', IP]
    const [terminal, terminalNoColor, forced, forcedNoColor, plain] = await Promise.all([
      runCliOnTerminal(args),
      runCliOnTerminal(args, { env: { NO_COLOR: '1' } }),
      runCli(args, { env: { FORCE_COLOR: '1' } }),
      runCli(args, { env: { FORCE_COLOR: '1', NO_COLOR: '1' } }),
      runCli(args),
    ])
    // biome-ignore lint/suspicious/noControlCharactersInRegex: an ANSI escape is what is looked for
    const ansi = /\u001b\[/
    expect(terminal.stdout).toMatch(ansi)
    expect(forced.stdout).toMatch(ansi)
    for (const run of [terminalNoColor, forcedNoColor, plain]) {
      expect(run.code).toBe(0)
      expect(run.stdout).toMatch(/^RULE +IDENTIFIER/m)
      expect(run.stdout).not.toMatch(ansi)
    }
  })
})
