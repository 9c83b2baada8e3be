import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import {
  createLimiter,
  HybridStore,
  LiveRules,
  RedisStore,
  type RulesOptions,
  TollgateConfigError,
} from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'

const rules = { api: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }] } } satisfies RulesOptions
/** One instant for every decision: no window boundary falls between them. */
const T0 = 1_763_700_000_000
const clock = () => T0

let url: string
let observer: Redis
beforeAll(() => {
  url = inject('redisUrl')
  observer = new Redis(url)
})
afterAll(async () => {
  await observer.quit()
})

const prefix = () => `close-client:${process.pid}:${randomUUID().slice(0, 8)}:`

/** A client that is ready, as one a script made and used would be. */
async function connected(): Promise<Redis> {
  const client = new Redis(url)
  await client.ping()
  return client
}

/** Resolves once the client has closed its connection for good: QUIT's reply comes just before. */
async function ended(client: Redis): Promise<void> {
  if (client.status !== 'end') await once(client, 'end')
}

const run = promisify(execFile)
const repoRoot = fileURLToPath(new URL('../../', import.meta.url))

// Regression: the README's Quick start, run as a script on Redis, never exited: limiter.close()
// left the ioredis client open, and nothing could hand the client to the store.
it("the README's Quick start runs as a script on Redis, prints what its comment says and exits", async () => {
  const readme = readFileSync(`${repoRoot}README.md`, 'utf8')
  const quickStart = /## Quick start\n\n```ts\n([\s\S]*?)```/.exec(readme)?.[1] as string
  expect(quickStart).toContain('closeClient: true')
  const printed = /^\/\/ (attempt 6: .*)$/m.exec(quickStart)?.[1]
  expect(printed).toBeDefined()
  // A database of its own: the script writes under the default prefix, with names other tests use.
  const database = new URL(url)
  database.pathname = '/13'
  const flusher = new Redis(database.toString())
  await flusher.flushdb()
  await flusher.quit()
  // The built package, as installed; from the test package, where 'ioredis' resolves. The script
  // has to end by itself: a client left open would keep it running until the timeout kills it.
  const source = quickStart.replace("'@tollgate/core'", JSON.stringify(`${repoRoot}packages/core/dist/index.js`))
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', source], {
    cwd: `${repoRoot}test`,
    env: { ...process.env, REDIS_URL: database.toString() },
    timeout: 20_000,
  })
  expect(stdout.trim().split('\n')).toEqual([printed])
})

describe('closeClient', () => {
  // Regression: a script on Redis never exited, because limiter.close() left the ioredis client
  // it was given open, and nothing let the user hand the client over.
  it("RedisStore: limiter.close() quits the client once the decisions' replies are in", async () => {
    const client = await connected()
    const store = new RedisStore({ client, prefix: prefix(), clock, closeClient: true })
    const limiter = createLimiter({ rules, store })
    const decisions = [1, 2, 3].map(() => limiter.consume('api', 'ip:203.0.113.7'))
    await limiter.close()
    await ended(client)
    expect((await Promise.all(decisions)).map((decision) => decision.allowed)).toEqual([true, true, true])
    expect((await Promise.all(decisions)).map((decision) => decision.windows[0]?.remaining)).toEqual([4, 3, 2])
  })

  it('RedisStore: leaves the client open by default', async () => {
    const client = await connected()
    const limiter = createLimiter({ rules, store: new RedisStore({ client, prefix: prefix() }) })
    await limiter.consume('api', 'ip:203.0.113.7')
    await limiter.close()
    expect(await client.ping()).toBe('PONG')
    await client.quit()
  })

  it('HybridStore: close() pushes what is left, then quits the client', async () => {
    const keys = prefix()
    const client = await connected()
    const store = new HybridStore({ client, prefix: keys, clock, autoSync: false, closeClient: true })
    const limiter = createLimiter({ rules, store })
    for (let i = 0; i < 3; i++) await limiter.consume('api', 'ip:203.0.113.7')
    await limiter.close()
    await ended(client)
    // What the closing sync pushed, as another process reads it.
    const reader = createLimiter({ rules, store: new RedisStore({ client: observer, prefix: keys, clock }) })
    expect((await reader.peek('api', 'ip:203.0.113.7')).windows[0]?.remaining).toBe(2)
    await reader.close()
  })

  it('LiveRules: close() stops reading and listening, then quits the client', async () => {
    const client = await connected()
    const live = new LiveRules({ client, defaults: rules, prefix: prefix(), closeClient: true })
    await live.refresh()
    await live.close()
    await ended(client)
  })

  it('closes a client two owners were told to close once, whichever closes first', async () => {
    const client = await connected()
    const keys = prefix()
    const live = new LiveRules({ client, defaults: rules, prefix: keys, nudges: false, closeClient: true })
    const store = new RedisStore({ client, prefix: keys, clock, closeClient: true })
    const limiter = createLimiter({ rules: live, store })
    expect((await limiter.consume('api', 'ip:203.0.113.7')).allowed).toBe(true)
    await live.close()
    await limiter.close()
    await live.close()
    await ended(client)
  })

  it('disconnects a lazy client that never connected, without connecting it', async () => {
    const client = new Redis(url, { lazyConnect: true })
    const store = new RedisStore({ client, prefix: prefix(), closeClient: true })
    await store.close()
    await ended(client)
  })

  it('is checked at construction, in each of the three', () => {
    const client = new Redis(url, { lazyConnect: true })
    const makers: Array<[string, (options: Record<string, unknown>) => unknown]> = [
      ['RedisStore', (options) => new RedisStore({ client, ...options })],
      ['HybridStore', (options) => new HybridStore({ client, autoSync: false, ...options })],
      ['LiveRules', (options) => new LiveRules({ client, defaults: rules, nudges: false, ...options })],
    ]
    for (const [name, make] of makers) {
      expect(() => make({ closeClient: 'yes' }), name).toThrow(TollgateConfigError)
      expect(() => make({ closeClient: 'yes' }), name).toThrow(
        `${name} option closeClient must be true or false, got "yes"`,
      )
    }
    client.disconnect()
  })
})
