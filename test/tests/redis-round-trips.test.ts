import { createLimiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { decideScript } from '../../packages/core/src/scripts/generated.js'
import { ManualClock } from '../src/manual-clock.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

/** Server-wide command counts, by command name, since the last CONFIG RESETSTAT. */
async function commandCounts(admin: Redis): Promise<Record<string, number>> {
  const info = await admin.info('commandstats')
  const counts: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1] as string] = Number(match[2])
  return counts
}

// A server of its own: command statistics and SCRIPT FLUSH are server-wide.
describe('RedisStore round trips', () => {
  let server: SpawnedRedis
  let client: Redis
  let admin: Redis
  let sent: string[]
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
    admin = new Redis(server.url)
    sent = []
    const send = client.sendCommand.bind(client)
    client.sendCommand = (command, stream) => {
      sent.push(command.name)
      return send(command, stream)
    }
  })
  afterAll(async () => {
    client.disconnect()
    admin.disconnect()
    await server.stop()
  })

  const rules = {
    'api.write': {
      algorithm: 'sliding-log' as const,
      windows: [
        { limit: 10, period: '1s' },
        { limit: 100, period: '1m' },
        { limit: 1000, period: '1h' },
      ],
      parent: 'api',
    },
    api: { algorithm: 'token-bucket' as const, windows: [{ limit: 5000, period: '1h' }] },
  } satisfies RulesOptions

  it('makes each consume, peek and refund of 3 windows × 2 identifiers × a parent one EVALSHA', async () => {
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'rt:' }), rules })
    const ids = ['ip:203.0.113.7', 'user:42']
    await limiter.consume('api.write', ids)
    for (const operation of ['consume', 'peek', 'refund'] as const) {
      await admin.config('RESETSTAT')
      sent.length = 0
      const decision = await limiter[operation]('api.write', ids)
      expect(decision.windows).toHaveLength(8)
      expect(sent).toEqual(['evalsha'])
      const counts = await commandCounts(admin)
      expect(counts.evalsha).toBe(1)
      expect(counts.eval).toBeUndefined()
    }
  })

  it("makes a hierarchy keyed by each level's identifier (by) and an override one EVALSHA, refused or not", async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: 'rt-by:' }),
      rules: {
        user: { windows: [{ limit: 3, period: '1m' }], by: ['user'], parent: 'org' },
        org: {
          windows: [{ limit: 5, period: '1m' }],
          by: ['org'],
          parent: 'global',
          overrides: { 'org:acme': { windows: [{ limit: 4, period: '1m' }] } },
        },
        global: { windows: [{ limit: 7, period: '1m' }], by: [] },
      },
    })
    for (const expected of [true, true, true, false]) {
      await admin.config('RESETSTAT')
      sent.length = 0
      const decision = await limiter.consume('user', ['user:a', 'org:acme'])
      expect(decision.allowed).toBe(expected)
      expect(decision.windows.map((w) => [w.rule, w.identifier, w.limit])).toEqual([
        ['user', 'user:a', 3],
        ['org', 'org:acme', 4],
        ['global', '*', 7],
      ])
      expect(sent).toEqual(['evalsha'])
      expect((await commandCounts(admin)).evalsha).toBe(1)
    }
  })

  it('makes a decision of a rule that blocks one EVALSHA, counting, starting or meeting a block', async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: 'rt-block:', refusalCache: false }),
      rules: {
        login: { windows: [{ limit: 1, period: '1m' }], block: { for: '1h', after: 2 }, by: ['ip'], parent: 'org' },
        org: { windows: [{ limit: 100, period: '1m' }], by: ['org'], block: { for: '1h' } },
      },
    })
    const reasons: string[] = []
    for (let i = 0; i < 4; i++) {
      await admin.config('RESETSTAT')
      sent.length = 0
      reasons.push((await limiter.consume('login', ['ip:203.0.113.7', 'org:acme'])).reason)
      expect(sent).toEqual(['evalsha'])
      expect((await commandCounts(admin)).evalsha).toBe(1)
    }
    expect(reasons).toEqual(['ok', 'limited', 'blocked', 'blocked'])
  })

  it('makes a decision that may shed one EVALSHA too, shed or not, in a batch with others', async () => {
    const shedding = {
      ...rules,
      api: { algorithm: 'token-bucket' as const, windows: [{ limit: 5000, period: '1h', lowBurst: 0 }] },
    } satisfies RulesOptions
    const draws = [0.5, 0, 0.999]
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: 'rt-shed:' }),
      rules: shedding,
      random: () => draws.shift() as number,
    })
    await admin.config('RESETSTAT')
    sent.length = 0
    // lowBurst 0: a request of 1 leaves a use of 1 of 5000, so only a draw below 1/5000 sheds it.
    const decisions = await Promise.all([
      limiter.consume('api.write', 'user:1'),
      limiter.consume('api.write', 'user:2'),
      limiter.peek('api.write', 'user:3'),
    ])
    expect(decisions.map((decision) => decision.reason)).toEqual(['ok', 'shed', 'ok'])
    expect(sent).toEqual(['evalsha'])
    expect((await commandCounts(admin)).evalsha).toBe(1)
  })

  it('fails only the decision whose random number is unusable, before it writes anything', async () => {
    const sha = (await admin.script('LOAD', decideScript.lua)) as string
    const replies = (await admin.evalsha(
      sha,
      3,
      'rt-bad:{a}:fw',
      'rt-bad:{b}:fw',
      'rt-bad:{c}:fw',
      'consume 1 1700000000000 * fw 10 60000/5',
      '1.5',
      'consume 1 1700000000000 * fw 10 60000/5',
      '0.5',
      'consume 1 1700000000000 fw 10 60000',
    )) as unknown[]
    expect(String(replies[0])).toContain('the random number 1.5 is not in [0, 1)')
    // Then two decisions, each charged: now × 2 + 1, a shed flag for the one that could shed, then
    // remaining, reset_at, fits_at.
    const now = 1_700_000_000_000
    const end = now - (now % 60_000) + 60_000
    expect(replies.slice(1)).toEqual([2 * now + 1, 0, 9, end, now, 2 * now + 1, 9, end, now])
    expect(await admin.exists('rt-bad:{a}:fw')).toBe(0)
  })

  it('ships a script that Redis accepts under the SHA the store sends', async () => {
    expect(await admin.script('LOAD', decideScript.lua)).toBe(decideScript.sha1)
  })

  it('recovers from SCRIPT FLUSH between two decisions', async () => {
    const clock = new ManualClock()
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'noscript:', clock: clock.now }), rules })
    expect((await limiter.consume('api.write', 'user:1')).windows[0]?.remaining).toBe(9)
    await admin.script('FLUSH')
    await admin.config('RESETSTAT')
    sent.length = 0
    expect((await limiter.consume('api.write', 'user:1')).windows[0]?.remaining).toBe(8)
    // The script was gone: EVALSHA met NOSCRIPT, and only that error was retried, as EVAL (ioredis
    // sends its retry as a second evalsha command and writes it as EVAL).
    expect(sent).toEqual(['evalsha', 'evalsha'])
    const counts = await commandCounts(admin)
    expect({ evalsha: counts.evalsha, eval: counts.eval }).toEqual({ evalsha: 1, eval: 1 })
    sent.length = 0
    expect((await limiter.consume('api.write', 'user:1')).windows[0]?.remaining).toBe(7)
    expect(sent).toEqual(['evalsha'])
  })

  it("decides on the server's clock by default", async () => {
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'time:' }), rules })
    const before = Date.now()
    const decision = await limiter.consume('api.write', 'user:1')
    const after = Date.now()
    // Same machine, so the server's TIME falls between the two local readings.
    expect(decision.nowMs).toBeGreaterThanOrEqual(before - 1)
    expect(decision.nowMs).toBeLessThanOrEqual(after + 1)
    expect(decision.windows[0]?.resetAtMs).toBe(decision.nowMs + 1_000)
  })

  it('sends the decisions made in one tick as one EVALSHA, each decided on its own', async () => {
    const clock = new ManualClock()
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'batch:', clock: clock.now }), rules })
    await limiter.consume('api.write', 'user:0')
    await admin.config('RESETSTAT')
    sent.length = 0
    // 12 decisions on 3 identifiers, all begun before any answer: one write, one script call.
    const decisions = await Promise.all(
      Array.from({ length: 12 }, (_, i) => limiter.consume('api.write', `user:${i % 3}`)),
    )
    expect(sent).toEqual(['evalsha'])
    expect((await commandCounts(admin)).evalsha).toBe(1)
    // In call order, as if made one after another: user:0 had spent one already.
    expect(decisions.map((d) => d.windows[0]?.remaining)).toEqual([8, 9, 9, 7, 8, 8, 6, 7, 7, 5, 6, 6])
    expect(decisions.every((d) => d.allowed && d.reason === 'ok')).toBe(true)
  })

  // An HTTP server sees each request in a callback of its own: the batch is the event loop's
  // turn, not the tick.
  it('sends the decisions begun in separate ticks of one event-loop turn as one EVALSHA', async () => {
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'turn:' }), rules })
    await limiter.consume('api.write', 'user:0')
    sent.length = 0
    const decisions = await new Promise<Array<Promise<unknown>>>((resolve) => {
      const started: Array<Promise<unknown>> = []
      const next = (i: number) => {
        started.push(limiter.consume('api.write', `user:${i}`))
        if (i < 4) process.nextTick(next, i + 1)
        else resolve(started)
      }
      process.nextTick(next, 0)
    })
    await Promise.all(decisions)
    expect(sent).toEqual(['evalsha'])
  })

  it('decides while fake timers stand in for the global ones', async () => {
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'fake:' }), rules })
    vi.useFakeTimers()
    try {
      const decision = await limiter.consume('api.write', 'user:0')
      expect(decision).toMatchObject({ allowed: true, reason: 'ok' })
    } finally {
      vi.useRealTimers()
    }
  })

  it('fails only the decision whose key is broken when others share its EVALSHA', async () => {
    const store = new RedisStore({ client, prefix: 'batchfail:' })
    const limiter = createLimiter({ store, rules })
    const keyOf = (rule: string, identifier: string) => {
      const { stateName, algorithm, windows } = limiter.rules.get(rule)!
      return store.keyOf({ rule: stateName, algorithm, windows, identifier })
    }
    await client.set(keyOf('api.write', 'user:bad'), 'not a sorted set', 'PX', 60_000)
    sent.length = 0
    const [before, broken, after] = await Promise.all([
      limiter.consume('api.write', 'user:a', { onStoreError: 'deny' }),
      limiter.consume('api.write', 'user:bad', { onStoreError: 'deny' }),
      limiter.consume('api.write', 'user:b', { onStoreError: 'deny' }),
    ])
    expect(sent).toEqual(['evalsha'])
    expect(before).toMatchObject({ allowed: true, reason: 'ok' })
    expect(after).toMatchObject({ allowed: true, reason: 'ok' })
    expect(broken).toMatchObject({ allowed: false, reason: 'store-error-denied' })
    expect(broken.error?.message).toMatch(/WRONGTYPE/)
    // The broken decision charged nothing anywhere, the others exactly once.
    expect(await client.exists(keyOf('api', 'user:bad'))).toBe(0)
    expect((await limiter.peek('api.write', 'user:a')).windows[0]?.remaining).toBe(9)
  })

  it('does not retry other errors', async () => {
    const store = new RedisStore({ client, prefix: 'wrongtype:' })
    const limiter = createLimiter({ store, rules })
    const { stateName, algorithm } = limiter.rules.get('api.write')!
    const key = store.keyOf({ rule: stateName, algorithm, windows: [], identifier: 'user:1' })
    await client.set(key, 'not a sorted set', 'PX', 60_000)
    sent.length = 0
    const decision = await limiter.consume('api.write', 'user:1')
    expect(decision).toMatchObject({ allowed: true, reason: 'store-error-allowed' })
    expect(decision.error?.message).toMatch(/WRONGTYPE/)
    expect(sent).toEqual(['evalsha'])
  })
})
