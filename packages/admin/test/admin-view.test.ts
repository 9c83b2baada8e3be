import {
  createLimiter,
  HybridStore,
  LiveRules,
  MemoryStore,
  RedisStore,
  type RulesOptions,
  shareFleetStats,
  TollgateConfigError,
} from '@tollgate/core'
import { useRedis } from '@tollgate/test-support'
import { ManualClock } from '@tollgate/test-support/manual-clock'
import { afterEach, describe, expect, it } from 'vitest'
import { type AdminServer, type AdminServerOptions, adminHandler, startAdminServer } from '../src/index.js'
import { type EventStream, openEventStream } from './event-stream.js'

/** At a second's start: decisions made at T0 count in the second S. */
const T0 = 1_763_700_000_000
const S = T0 / 1000
const TOKEN = 'test-token-0123456789abcdef'
const rules = {
  login: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }] },
  api: { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1m' }] },
} satisfies RulesOptions

const redis = useRedis()
let prefixes = 0
const opened: Array<{ close(): unknown }> = []

afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close()
})

async function serve(options: Omit<AdminServerOptions, 'client' | 'port'>): Promise<AdminServer> {
  const server = await startAdminServer({ client: redis(), port: 0, intervalMs: 20, ...options })
  opened.push(server)
  return server
}

async function events(server: AdminServer): Promise<EventStream> {
  const stream = await openEventStream(`${server.url}events`)
  opened.push(stream)
  return stream
}

function post(server: AdminServer, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${server.url}reset`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
}

const errorOf = async (response: Response) => ((await response.json()) as { error: string }).error

/** A process of the fleet: a limiter on its own MemoryStore that shares its counts, flushed by the test. */
function memoryProcess(prefix: string, clock: ManualClock) {
  const limiter = createLimiter({ rules, store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }) })
  const stats = shareFleetStats(limiter, { client: redis(), prefix, flushIntervalMs: 60_000, clock: clock.now })
  opened.push(limiter, stats)
  return { limiter, stats }
}

describe('the event stream', () => {
  it("sends the fleet's decisions per second by outcome, refusals by rule and window, top offenders and processes as a load runs", async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const { limiter, stats } = memoryProcess(prefix, clock)
    // The view looks 2 s later than the decisions: a second is shown once every process flushed it.
    const server = await serve({ prefix, clock: () => clock.now() + 2_000 })
    const stream = await events(server)
    const first = await stream.until('a first snapshot came', () => true)
    expect(first.seconds).toHaveLength(60)
    expect(first.seconds.every((second) => Object.keys(second.decisions).length === 0)).toBe(true)
    expect(first).toMatchObject({
      prefix,
      top: [],
      processes: [],
      refusals: [],
      resets: false,
      identifiersShown: false,
    })

    for (let i = 0; i < 30; i++) await limiter.consume('login', 'ip:203.0.113.7')
    for (let i = 0; i < 8; i++) await limiter.consume('api', `user:${i % 2}`)
    // The lists of refused identifiers are written topIntervalMs (10 s) after the last ones.
    clock.advance(10_000)
    await stats.flush()
    const loaded = await stream.until('second S counts 13 allowed', (event) =>
      event.seconds.some((second) => second.second === S && second.decisions.allowed === 13),
    )
    expect(loaded.seconds.find((second) => second.second === S)?.decisions).toEqual({ allowed: 13, limited: 25 })
    expect(loaded.seconds.at(-1)?.second).toBe(S + 10)
    expect(loaded.refusals).toEqual([{ rule: 'login', window: '60s', lastSecond: 0, lastMinute: 25 }])
    expect(loaded.top).toEqual([{ rule: 'login', identifier: 'ip:203.0.113.*', refusals: 25 }])
    expect(loaded.processes).toHaveLength(1)
    expect(loaded.processes[0]?.hybrid).toBeUndefined()
    expect(loaded.rules).toMatchObject({ epoch: 0, stale: false })

    // A second later, more refusals: the last second shown moves.
    clock.advance(1_000)
    for (let i = 0; i < 4; i++) await limiter.consume('login', 'ip:203.0.113.7')
    await stats.flush()
    const moved = await stream.until('second S+11 is shown', (event) => event.seconds.at(-1)?.second === S + 11)
    expect(moved.seconds.at(-1)?.decisions).toEqual({ limited: 4 })
    expect(moved.refusals).toEqual([{ rule: 'login', window: '60s', lastSecond: 4, lastMinute: 29 }])
  })

  it('masks identifiers unless told to show them', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const { limiter, stats } = memoryProcess(prefix, clock)
    const identifiers = ['ip:203.0.113.7', 'ip:2001:db8:1234:5600::/56', 'user:alice', 'opaque-api-key-value']
    for (const identifier of identifiers)
      for (let i = 0; i < 6 + identifiers.indexOf(identifier); i++) {
        await limiter.consume('login', identifier)
      }
    clock.advance(10_000)
    await stats.flush()
    const has4 = (event: { top: unknown[] }) => event.top.length === 4
    const masked = await (await events(await serve({ prefix, clock: clock.now }))).until('4 identifiers listed', has4)
    expect(masked.identifiersShown).toBe(false)
    const shown = masked.top.map((entry) => entry.identifier)
    expect(shown).toEqual([
      expect.stringMatching(/^#[0-9a-f]{8}$/),
      expect.stringMatching(/^user:#[0-9a-f]{8}$/),
      'ip:2001:db8:1234:*',
      'ip:203.0.113.*',
    ])
    const text = JSON.stringify(masked)
    for (const identifier of ['203.0.113.7', 'alice', 'opaque-api-key-value', '5600::'])
      expect(text).not.toContain(identifier)

    const plain = await (await events(await serve({ prefix, clock: clock.now, showIdentifiers: true }))).until(
      '4 identifiers listed',
      has4,
    )
    expect(plain.identifiersShown).toBe(true)
    expect(plain.top.map((entry) => entry.identifier)).toEqual([...identifiers].reverse())
  })

  it('says why Redis could not be read, and goes on', async () => {
    // A handler on a client that cannot reach Redis: every read fails.
    const { Redis } = await import('ioredis')
    const broken = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false })
    opened.push({ close: () => broken.disconnect() })
    const failing = await startAdminServer({ client: broken, port: 0, intervalMs: 20, onWarning: () => {} })
    opened.push(failing)
    const failed = await (await events(failing)).until('an error is reported', (event) => event.error !== undefined)
    expect(failed.error).toMatch(/Stream isn't writeable|Connection is closed|ECONNREFUSED/)
    expect(failed.rules.stale).toBe(true)
  })
})

describe('resets', () => {
  /** A process of the fleet deciding on Redis, as the view's reset reaches it. */
  function redisProcess(prefix: string, clock: ManualClock, limiterRules: RulesOptions | LiveRules = rules) {
    const limiter = createLimiter({
      rules: limiterRules,
      store: new RedisStore({ client: redis(), prefix, clock: clock.now }),
    })
    opened.push(limiter)
    return limiter
  }

  it('forgets the identifier with the token: the next consume is allowed', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const limiter = redisProcess(prefix, clock)
    for (let i = 0; i < 5; i++) await limiter.consume('login', 'ip:203.0.113.7')
    expect((await limiter.consume('login', 'ip:203.0.113.7')).allowed).toBe(false)
    const server = await serve({ prefix, rules, token: TOKEN })
    const response = await post(
      server,
      { rule: 'login', identifier: 'ip:203.0.113.7' },
      { Authorization: `Bearer ${TOKEN}` },
    )
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      reset: true,
      rule: 'login',
      identifier: 'ip:203.0.113.*',
      existed: 1,
      keyCount: 1,
    })
    // The process held Redis's refusal (its refusal cache) and keeps it for up to maxHoldMs.
    expect((await limiter.consume('login', 'ip:203.0.113.7')).allowed).toBe(false)
    clock.advance(1_000)
    expect((await limiter.consume('login', 'ip:203.0.113.7')).allowed).toBe(true)
  })

  // Regression: an identifier copied from the top offenders table (masked) was reset as it was
  // typed, which names no one, and the page said "Reset ip:#9a75bcb8 in auth.login".
  it('says how many keys held state: none for an identifier no process counted, such as a masked one', async () => {
    const prefix = `admin${prefixes++}:`
    const limiter = redisProcess(prefix, new ManualClock(T0))
    for (let i = 0; i < 5; i++) await limiter.consume('login', 'ip:203.0.113.7')
    const server = await serve({ prefix, rules, token: TOKEN })
    const response = await post(
      server,
      { rule: 'login', identifier: 'ip:203.0.113.*' },
      { Authorization: `Bearer ${TOKEN}` },
    )
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      reset: true,
      rule: 'login',
      identifier: expect.stringMatching(/^ip:#[0-9a-f]{8}$/),
      existed: 0,
      keyCount: 1,
    })
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
  })

  /** A RedisStore process that refused `ip:203.0.113.7` on login, with its list of refused identifiers written. */
  async function refusedOffender(prefix: string, clock: ManualClock) {
    const limiter = redisProcess(prefix, clock)
    const stats = shareFleetStats(limiter, { client: redis(), prefix, flushIntervalMs: 60_000, clock: clock.now })
    opened.push(stats)
    for (let i = 0; i < 8; i++) await limiter.consume('login', 'ip:203.0.113.7')
    // The lists of refused identifiers are written topIntervalMs (10 s) after the last ones.
    clock.advance(10_000)
    await stats.flush()
    return limiter
  }

  it('resets a masked top offender by the handle of its row, which tells nothing of the identifier', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const limiter = await refusedOffender(prefix, clock)
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    const server = await serve({ prefix, rules, token: TOKEN, clock: () => clock.now() + 2_000 })
    const listed = await (await events(server)).until('the offender is listed', (event) => event.top.length === 1)
    const [offender] = listed.top
    expect(offender).toEqual({
      rule: 'login',
      identifier: 'ip:203.0.113.*',
      refusals: 3,
      handle: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
    })
    expect(JSON.stringify(listed)).not.toContain('203.0.113.7')

    const response = await post(server, { handle: offender?.handle }, { Authorization: `Bearer ${TOKEN}` })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      reset: true,
      rule: 'login',
      identifier: 'ip:203.0.113.*',
      existed: 1,
      keyCount: 1,
    })
    // Past the hold of the refusal the process answered the peek with.
    clock.advance(1_000)
    expect((await limiter.consume('login', 'ip:203.0.113.7')).allowed).toBe(true)
  })

  it('shows a top offender blocked by its rule, until when, and the rules that key by kind, override or block', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const blocking = {
      login: {
        algorithm: 'fixed-window',
        windows: [{ limit: 5, period: '1m' }],
        block: { for: '15m', factor: 2, max: '1h' },
      },
      org: {
        algorithm: 'fixed-window',
        windows: [{ limit: 100, period: '1m' }],
        by: ['org'],
        overrides: { 'org:acme': { windows: [{ limit: 500, period: '1m' }] } },
      },
    } satisfies RulesOptions
    const limiter = redisProcess(prefix, clock, blocking)
    const stats = shareFleetStats(limiter, { client: redis(), prefix, flushIntervalMs: 60_000, clock: clock.now })
    opened.push(stats)
    const reasons = []
    for (let i = 0; i < 8; i++) reasons.push((await limiter.consume('login', 'ip:203.0.113.7')).reason)
    expect(reasons.slice(4)).toEqual(['ok', 'blocked', 'blocked', 'blocked'])
    clock.advance(10_000)
    await stats.flush()
    const server = await serve({ prefix, rules: blocking, showIdentifiers: true, clock: () => clock.now() + 2_000 })
    const listed = await (await events(server)).until('the offender is listed', (event) => event.top.length === 1)
    expect(listed.top[0]).toMatchObject({ rule: 'login', identifier: 'ip:203.0.113.7', blockedUntilMs: T0 + 900_000 })
    expect(listed.rules.details).toEqual([
      { name: 'login', windows: '5/1m', notes: ['block 15m, ×2 up to 1h'] },
      { name: 'org', windows: '100/1m', notes: ['by org', 'org:acme: 500/1m'] },
    ])
  })

  it('resolves only handles it listed lately: never one a client made, one of another view, or one gone from the list', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const limiter = await refusedOffender(prefix, clock)
    const viewClock = () => clock.now() + 2_000
    const server = await serve({ prefix, rules, token: TOKEN, clock: viewClock })
    const other = await serve({ prefix, rules, token: TOKEN, clock: viewClock })
    const authorization = { Authorization: `Bearer ${TOKEN}` }
    const [offender] = (await (await events(server)).until('listed', (event) => event.top.length === 1)).top
    const [elsewhere] = (await (await events(other)).until('listed', (event) => event.top.length === 1)).top
    // Each view keys its handles with a secret of its own.
    expect(elsewhere?.handle).not.toBe(offender?.handle)

    const made = await post(server, { handle: 'AAAAAAAAAAAAAAAAAAAAAA' }, authorization)
    expect(made.status).toBe(404)
    expect(await errorOf(made)).toBe(
      'no offender this view listed lately has this handle: reset it by rule and identifier',
    )
    const mixed = await post(server, { handle: offender?.handle, identifier: 'ip:198.51.100.1' }, authorization)
    expect(mixed.status).toBe(400)
    expect((await post(server, { handle: offender?.handle }, {})).status).toBe(403)
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    // Six minutes on, the offender is out of the five minutes listed, and its handle is forgotten.
    clock.advance(6 * 60_000)
    await (await events(server)).until('the list is empty', (event) => event.top.length === 0)
    expect((await post(server, { handle: offender?.handle }, authorization)).status).toBe(404)
  })

  it('gives no handles on a read-only view', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    await refusedOffender(prefix, clock)
    const server = await serve({ prefix, rules, clock: () => clock.now() + 2_000 })
    const [offender] = (await (await events(server)).until('listed', (event) => event.top.length === 1)).top
    expect(offender).toEqual({ rule: 'login', identifier: 'ip:203.0.113.*', refusals: 3 })
  })

  it('reaches a process on a HybridStore at its next sync', async () => {
    const prefix = `admin${prefixes++}:`
    const store = new HybridStore({ client: redis(), prefix, autoSync: false, clock: () => T0 })
    const limiter = createLimiter({ rules, store })
    opened.push(limiter)
    for (let i = 0; i < 6; i++) await limiter.consume('login', 'ip:203.0.113.7')
    await store.syncNow()
    const server = await serve({ prefix, rules, token: TOKEN })
    const response = await post(
      server,
      { rule: 'login', identifier: 'ip:203.0.113.7' },
      { Authorization: `Bearer ${TOKEN}` },
    )
    expect(response.status).toBe(200)
    // It decides on the totals of its last sync until the next one.
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    await store.syncNow()
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(true)
  })

  it('answers 403 without the token, or with another, and changes nothing', async () => {
    const prefix = `admin${prefixes++}:`
    const clock = new ManualClock(T0)
    const limiter = redisProcess(prefix, clock)
    for (let i = 0; i < 5; i++) await limiter.consume('login', 'ip:203.0.113.7')
    const before = await redis().keys(`${prefix}*`)
    expect(before.length).toBeGreaterThan(0)
    const server = await serve({ prefix, rules, token: TOKEN })
    const target = { rule: 'login', identifier: 'ip:203.0.113.7' }
    const attempts: Array<Record<string, string>> = [
      {},
      { Authorization: `Bearer ${TOKEN}x` },
      { Authorization: TOKEN },
      { Authorization: 'Bearer ' },
    ]
    for (const headers of attempts) {
      const response = await post(server, target, headers)
      expect(response.status).toBe(403)
      expect(await errorOf(response)).toMatch(/token/)
    }
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    expect((await redis().keys(`${prefix}*`)).sort()).toEqual(before.sort())
  })

  it('is never allowed when the view has no token', async () => {
    const prefix = `admin${prefixes++}:`
    const limiter = redisProcess(prefix, new ManualClock(T0))
    for (let i = 0; i < 5; i++) await limiter.consume('login', 'ip:203.0.113.7')
    const server = await serve({ prefix, rules })
    for (const authorization of [`Bearer ${TOKEN}`, 'Bearer undefined', 'Bearer ']) {
      const response = await post(
        server,
        { rule: 'login', identifier: 'ip:203.0.113.7' },
        { Authorization: authorization },
      )
      expect(response.status).toBe(403)
      expect(await errorOf(response)).toMatch(/without a token/)
    }
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    expect((await (await events(server)).until('a snapshot came', () => true)).resets).toBe(false)
  })

  it('resets the keys of the rule in force when a published override changed its shape', async () => {
    const prefix = `admin${prefixes++}:`
    const live = new LiveRules({ client: redis(), defaults: rules, prefix, pollIntervalMs: 0, nudges: false })
    // The rules' keys have no TTL (they are configuration): gone with the test.
    opened.push({
      close: () =>
        redis().del(...['epoch', 'current', 'changed', 'history', 'ids'].map((key) => `${prefix}{rules}:${key}`)),
    })
    opened.push(live)
    await live.publish({ login: { algorithm: 'fixed-window', windows: [{ limit: 2, period: '30s' }] } })
    const clock = new ManualClock(T0)
    const limiter = redisProcess(prefix, clock, live)
    for (let i = 0; i < 2; i++) await limiter.consume('login', 'ip:203.0.113.7')
    expect((await limiter.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    // The view knows only the rules in code; the override it reads from Redis keys the rule elsewhere.
    const server = await serve({ prefix, rules, token: TOKEN })
    const response = await post(
      server,
      { rule: 'login', identifier: 'ip:203.0.113.7' },
      { Authorization: `Bearer ${TOKEN}` },
    )
    expect(response.status).toBe(200)
    // Past the hold of the refusal the process answered the peek with.
    clock.advance(1_000)
    expect((await limiter.consume('login', 'ip:203.0.113.7')).allowed).toBe(true)
    const snapshot = await (await events(server)).until('a snapshot came', () => true)
    expect(snapshot.rules).toEqual({
      epoch: 1,
      stale: false,
      rejected: [],
      names: ['api', 'login'],
      details: [
        { name: 'api', windows: '100/1m', notes: [] },
        // The limits in force: the published ones.
        { name: 'login', windows: '2/30s', notes: [] },
      ],
    })
  })

  it('says what is wrong with a reset it cannot make', async () => {
    const server = await serve({ prefix: `admin${prefixes++}:`, rules, token: TOKEN })
    const authorization = { Authorization: `Bearer ${TOKEN}` }
    const unknown = await post(server, { rule: 'logon', identifier: 'ip:203.0.113.7' }, authorization)
    expect(unknown.status).toBe(404)
    expect(await errorOf(unknown)).toBe('no rule "logon" is in force; the rules are "api", "login"')
    expect((await post(server, { rule: 'login' }, authorization)).status).toBe(400)
    expect((await post(server, { rule: 'login', identifier: 'x'.repeat(1025) }, authorization)).status).toBe(400)
    const notJson = await fetch(`${server.url}reset`, { method: 'POST', headers: authorization, body: 'rule=login' })
    expect(notJson.status).toBe(415)
    const tooLong = await post(server, { rule: 'login', identifier: 'ip:1', pad: 'x'.repeat(5000) }, authorization)
    expect(tooLong.status).toBe(413)
    expect((await fetch(`${server.url}reset`)).status).toBe(405)
  })
})

describe('the page', () => {
  it('serves the page, Preact, htm and uPlot from the installed packages, only the import map inline', async () => {
    const server = await serve({ prefix: `admin${prefixes++}:` })
    const page = await fetch(server.url)
    expect(page.status).toBe(200)
    const html = await page.text()
    const policy = page.headers.get('content-security-policy') ?? ''
    expect(policy).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/]+=*';/)
    expect(policy).toContain("frame-ancestors 'none'")
    const { createHash } = await import('node:crypto')
    const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)?.[1] as string
    expect(policy).toContain(`'sha256-${createHash('sha256').update(importMap).digest('base64')}'`)
    for (const [path, type, text] of [
      ['app.js', 'text/javascript', "from 'preact'"],
      ['vendor/preact.js', 'text/javascript', 'export'],
      ['vendor/preact-hooks.js', 'text/javascript', 'from"preact"'],
      ['vendor/htm.js', 'text/javascript', 'export'],
      ['vendor/uplot.js', 'text/javascript', 'export { uPlot as default }'],
      ['vendor/uplot.css', 'text/css', '.uplot'],
    ] as const) {
      const response = await fetch(`${server.url}${path}`)
      expect(response.status, path).toBe(200)
      expect(response.headers.get('content-type'), path).toContain(type)
      expect(await response.text(), path).toContain(text)
    }
    for (const file of Object.values(JSON.parse(importMap).imports) as string[]) {
      expect((await fetch(new URL(file, server.url))).status, file).toBe(200)
    }
    expect((await fetch(`${server.url}nothing-here`)).status).toBe(404)
  })

  it('answers only requests addressed to loopback when it listens there', async () => {
    const server = await serve({ prefix: `admin${prefixes++}:` })
    const { request } = await import('node:http')
    const status = (host: string) =>
      new Promise<number | undefined>((resolve, reject) => {
        request(server.url, { headers: { Host: host } }, (response) => {
          response.resume()
          resolve(response.statusCode)
        })
          .on('error', reject)
          .end()
      })
    expect(await status('attacker.example:80')).toBe(403)
    expect(await status(`localhost:${server.port}`)).toBe(200)
    expect(await status(`127.0.0.1:${server.port}`)).toBe(200)
  })
})

describe('options', () => {
  it('refuses bad options by name, never repeating the token', () => {
    const client = redis()
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{}, /option client must be an ioredis Redis or Cluster client, got undefined/],
      [{ client, prefix: 'a{b}' }, /option prefix must be a string without '\{' or '\}', got "a\{b\}"/],
      [
        { client, token: 'short-secret' },
        /option token must be a string of at least 16 characters, got a string of 12 characters/,
      ],
      [{ client, showIdentifiers: 'yes' }, /option showIdentifiers must be a boolean, got "yes"/],
      [{ client, intervalMs: 0 }, /option intervalMs must be an integer ≥ 10, got 0/],
      // Past a timer's 32-bit delay Node would tick every millisecond.
      [{ client, intervalMs: 2 ** 31 }, /option intervalMs must be at most 2147483647, got 2147483648/],
      [{ client, flushIntervalMs: 2 ** 31 }, /option flushIntervalMs must be at most 2147483647, got 2147483648/],
      [{ client, basePath: '/tollgate/' }, /option basePath must be '' or a path .*, got "\/tollgate\/"/],
      [{ client, showIdentifier: true }, /unknown option 'showIdentifier'; known options are/],
      [{ client, port: 80 }, /unknown option 'port'/],
    ]
    for (const [options, message] of cases) {
      expect(() => adminHandler(options as never)).toThrow(TollgateConfigError)
      expect(() => adminHandler(options as never)).toThrow(message)
    }
    try {
      adminHandler({ client, token: 'short-secret' })
    } catch (error) {
      expect((error as Error).message).not.toContain('short-secret')
    }
  })

  it('refuses a bad port or host before listening', async () => {
    await expect(startAdminServer({ client: redis(), port: 70_000 })).rejects.toThrow(
      /startAdminServer option port must be an integer from 0 to 65535, got 70000/,
    )
    await expect(startAdminServer({ client: redis(), port: 0, host: '' })).rejects.toThrow(/option host/)
    await expect(startAdminServer({ client: redis(), port: 0, hots: 'localhost' } as never)).rejects.toThrow(
      /^startAdminServer: unknown option 'hots'; known options are .*'port', 'host'$/,
    )
  })
})
