import {
  ALGORITHMS,
  createLimiter,
  type Decision,
  type Limiter,
  RedisStore,
  type RulesOptions,
  type TollgateError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keysWithTtl } from '../src/redis-keys.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'
import { keysWithoutTtl } from '../src/ttl-audit.js'

const PREFIX = `hygiene:${process.pid}:`
const MAX_KEY_BYTES = 200
// The longest name a rule may have (128), past the 64 characters a key part keeps raw: its key part is a digest.
const LONG_RULE = 'r'.repeat(128)

// Periods of a minute and more: no key can expire while the test runs and hide a missing TTL.
const rules: RulesOptions = {
  ...Object.fromEntries(
    ALGORITHMS.map((algorithm) => [
      algorithm,
      {
        algorithm,
        windows: [
          { limit: 3, period: '1m' },
          { limit: 20, period: '1h' },
        ],
      },
    ]),
  ),
  child: { algorithm: 'gcra', windows: [{ limit: 4, period: '1m' }], parent: 'mid' },
  mid: { algorithm: 'fixed-window', windows: [{ limit: 6, period: '1m' }], parent: 'root' },
  root: { algorithm: 'sliding-log', windows: [{ limit: 100, period: '1h' }] },
  'we{ird}:\u0000rule': { algorithm: 'sliding-window', windows: [{ limit: 2, period: '1m' }], parent: 'root' },
  [LONG_RULE]: { algorithm: 'token-bucket', windows: [{ limit: 2, period: '1m' }] },
  single: { windows: [{ limit: 1, period: '1m' }] },
}

const hostileIdentifiers = [
  'ip:203.0.113.7',
  'x'.repeat(10 * 1024),
  'a\u0000b',
  '\u0000',
  '{',
  '}',
  '{tag}',
  '}{',
  ':',
  '::{:}::',
  '\ud800',
  '\udc00',
  'a\udfffb',
  '\ufffd',
  'ключ',
  '#not-a-digest',
  'k'.repeat(64),
  'k'.repeat(65),
]

describe('RedisStore key hygiene on a dedicated server', () => {
  let server: SpawnedRedis
  let client: Redis
  let store: RedisStore
  let limiter: Limiter
  const storeErrors: TollgateError[] = []
  const decisions: Decision[] = []

  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url, { maxRetriesPerRequest: 1 })
    store = new RedisStore({ client, prefix: PREFIX })
    // A generous bound and fail-closed: any store failure shows up as a reason, never as a slow pass.
    limiter = createLimiter({ store, rules, onStoreError: 'deny', storeTimeoutMs: 5_000, onWarning: () => {} })
    limiter.on('store-error', (error) => storeErrors.push(error))
  }, 30_000)
  afterAll(async () => {
    await limiter?.close()
    await client?.quit()
    await server?.stop()
  })

  async function decide(call: Promise<Decision>): Promise<Decision> {
    const decision = await call
    decisions.push(decision)
    return decision
  }

  it('refuses an empty identifier with a clear error and writes nothing for it', async () => {
    for (const identifiers of ['', [''], ['ip:203.0.113.7', '']]) {
      await expect(limiter.consume('sliding-log', identifiers)).rejects.toMatchObject({
        code: 'TG_INVALID_ARGUMENT',
        message: 'an identifier must be a non-empty string, got ""',
      })
    }
    await expect(limiter.peek('child', '')).rejects.toThrow(/non-empty string/)
    await expect(limiter.refund('child', [''])).rejects.toThrow(/non-empty string/)
    await expect(limiter.reset('child', '')).rejects.toThrow(/non-empty string/)
    expect(await keysWithTtl(client, '')).toEqual([])
  })

  it('keeps lone surrogates apart from each other and from U+FFFD', async () => {
    const lookalikes = ['\ud800', '\udc00', '\ufffd']
    for (const identifier of lookalikes) {
      expect((await decide(limiter.consume('single', identifier))).reason).toBe('ok')
    }
    const keys = lookalikes.map((identifier) =>
      store.keyOf({ rule: limiter.rules.get('single')!.stateName, algorithm: 'sliding-log', windows: [], identifier }),
    )
    expect(new Set(keys).size).toBe(lookalikes.length)
  })

  it('runs every algorithm, parents and multi-identifier decisions over hostile identifiers', async () => {
    const names = Object.keys(rules)
    // Groups of up to 8 distinct identifiers (the most a decision takes), sliding over the list.
    const groups = hostileIdentifiers.map((_, i) =>
      Array.from({ length: 1 + (i % 8) }, (_, j) => hostileIdentifiers[(i + j) % hostileIdentifiers.length] as string),
    )
    for (const rule of names) {
      for (const identifier of hostileIdentifiers) {
        await decide(limiter.peek(rule, identifier))
        for (let i = 0; i < 4; i++) await decide(limiter.consume(rule, identifier))
        await decide(limiter.refund(rule, identifier))
        await decide(limiter.consume(rule, identifier, { cost: 0 }))
      }
      for (const group of groups) {
        await decide(limiter.consume(rule, group, { cost: 2 }))
        await decide(limiter.peek(rule, group))
        await decide(limiter.refund(rule, group))
      }
      await limiter.reset(rule, groups[3] as string[])
      await decide(limiter.consume(rule, groups[3] as string[]))
    }

    const reasons = new Set(decisions.map((decision) => decision.reason))
    expect(storeErrors).toEqual([])
    expect([...reasons].sort()).toEqual(['limited', 'ok'])
  })

  it('leaves only prefixed, expiring, short keys, each one a key the workload addresses', async () => {
    const everyKey = await keysWithTtl(client, '')
    expect(everyKey.length).toBeGreaterThan(100)

    const addressable = new Set<string>()
    for (const rule of limiter.rules.values()) {
      for (const identifier of hostileIdentifiers) {
        addressable.add(store.keyOf({ rule: rule.stateName, algorithm: rule.algorithm, windows: [], identifier }))
      }
    }
    // Refunds and resets also write an operation's key in the slot of the identifier they touch
    // (`<prefix>!op:{<identifier's tag>}:<id>`, lua/lib/operation.lua), and a reset a mark beside
    // the key it forgot (`<key>:reset`, lua/reset.lua): those of the workload's identifiers only.
    const tags = new Set([...addressable].map((key) => key.slice(key.indexOf('{'), key.indexOf('}') + 1)))
    const addressed = (key: string) =>
      addressable.has(key) ||
      (key.endsWith(':reset') && addressable.has(key.slice(0, -':reset'.length))) ||
      (key.startsWith(`${PREFIX}!op:`) && tags.has(key.slice(key.indexOf('{'), key.indexOf('}') + 1)))
    const strays = everyKey.filter(({ key }) => !addressed(key)).map(({ key }) => key)
    const unprefixed = everyKey.filter(({ key }) => !key.startsWith(PREFIX)).map(({ key }) => key)
    const tooLong = everyKey.filter(({ key }) => Buffer.byteLength(key) > MAX_KEY_BYTES).map(({ key }) => key)
    const immortal = everyKey.filter(({ ttlMs }) => ttlMs <= 0).map(({ key }) => key)
    expect({ strays, unprefixed, tooLong, immortal }).toEqual({ strays: [], unprefixed: [], tooLong: [], immortal: [] })
    expect(await keysWithoutTtl(client)).toEqual([])
  })
})
