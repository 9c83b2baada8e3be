import { createLimiter, HybridStore, type Limiter, type LiveRulesOptions, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { FaultProxy } from '../src/fault-proxy.js'
import { pollUntil } from '../src/poll.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000)
const LIMIT = 10
const rules = { r: { algorithm: 'fixed-window', windows: [{ limit: LIMIT, period: '1m' }] } } as const

/** Between ioredis and the tests' Redis: the processes under test talk through it; `direct` does not. */
let proxy: FaultProxy
let direct: Redis
beforeAll(async () => {
  const target = new URL(inject('redisUrl'))
  proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) })
  direct = new Redis(inject('redisUrl'))
})
afterAll(async () => {
  direct.disconnect()
  await proxy.close()
})

// ioredis, at its defaults, sends again the commands whose replies it lost when it reconnects. A
// reply lost after Redis ran a write that gives units back (a proxy forwarding the command, then
// dropping the connection) once applied that write twice: a refund of 10 let 20 more through.
describe('writes that give units back or settle apply once, however often a lost reply has them sent', () => {
  let prefixes = 0
  const opened: Array<{ close(): Promise<unknown> } | { disconnect(): void }> = []

  afterEach(async () => {
    proxy.set({ kind: 'pass' })
    for (const item of opened.splice(0)) {
      if ('close' in item) await item.close()
      else item.disconnect()
    }
  })

  /** A process whose connection to Redis goes through the proxy, ioredis at its defaults, and one whose does not. */
  async function processes() {
    const prefix = `lost-replies:${process.pid}:${prefixes++}:`
    const clock = () => T0
    const through = new Redis(proxy.url)
    const proxied = createLimiter({ store: new RedisStore({ client: through, prefix, clock }), rules })
    const other = createLimiter({
      store: new RedisStore({ client: direct, prefix, clock, refusalCache: false }),
      rules,
    })
    opened.push(proxied, other, through)
    // Connected and ready, so that the reply a test drops is its command's, not the ready check's.
    await through.ping()
    return { proxied, other, through }
  }

  async function admitted(limiter: Limiter, count: number): Promise<number> {
    let ok = 0
    for (let i = 0; i < count; i++) if ((await limiter.consume('r', 'ip:1')).allowed) ok++
    return ok
  }

  /** Until the proxy has dropped one more reply than `before`. */
  async function dropped(before: number): Promise<void> {
    await pollUntil('the command ran and its reply was dropped', 10_000, async () =>
      proxy.droppedReplies > before ? { done: true, value: undefined } : { done: false, state: 'not yet' },
    )
  }

  /** Until the proxied client is back and has sent again what it had not heard of. */
  async function reconnected(through: Redis, limiter: Limiter): Promise<void> {
    await pollUntil('the proxied client answers again', 10_000, async () =>
      through.status === 'ready' ? { done: true, value: undefined } : { done: false, state: through.status },
    )
    // Commands keep their order on the connection: the one sent again ran before this peek.
    await limiter.peek('r', 'ip:1', { storeTimeoutMs: 10_000 })
  }

  it('a refund whose reply was lost gives its units back once', async () => {
    const { proxied, other, through } = await processes()
    expect(await admitted(other, LIMIT)).toBe(LIMIT)
    // The refund runs in Redis; its reply is lost, and the proxy refuses the client until told.
    const before = proxy.droppedReplies
    proxy.dropNextReply({ kind: 'reset' })
    const refunding = proxied.refund('r', 'ip:1', { cost: LIMIT }).catch((error: unknown) => error)
    await dropped(before)
    expect(await admitted(other, LIMIT)).toBe(LIMIT)
    proxy.set({ kind: 'pass' })
    await refunding
    await reconnected(through, proxied)
    expect(await admitted(other, LIMIT)).toBe(0)
  })

  it('a refund whose reply was lost and sent again at once resolves, applied once', async () => {
    const { proxied, other } = await processes()
    expect(await admitted(other, LIMIT)).toBe(LIMIT)
    const before = proxy.droppedReplies
    proxy.dropNextReply()
    const refund = await proxied.refund('r', 'ip:1', { cost: LIMIT, storeTimeoutMs: 10_000 })
    expect(refund.windows[0]?.remaining).toBe(LIMIT)
    expect(proxy.droppedReplies).toBe(before + 1)
    expect(await admitted(other, 2 * LIMIT)).toBe(LIMIT)
  })

  it('a settle whose charge reply was lost and sent again charges the difference once', async () => {
    const { proxied, other } = await processes()
    const reservation = await proxied.reserve('r', 'ip:1', { cost: 1, storeTimeoutMs: 10_000 })
    expect(reservation.decision.allowed).toBe(true)
    const before = proxy.droppedReplies
    proxy.dropNextReply()
    // The charge of the difference (LIMIT - 1 more) runs, its reply is lost, ioredis sends it again.
    await reservation.settle(LIMIT)
    expect(proxy.droppedReplies).toBe(before + 1)
    expect(await admitted(other, 1)).toBe(0)
    const peek = await other.peek('r', 'ip:1', { cost: 0 })
    // Charged once: LIMIT used, not LIMIT + LIMIT - 1.
    expect(peek.windows[0]?.remaining).toBe(0)
    await other.refund('r', 'ip:1', { cost: LIMIT })
    expect(await admitted(other, LIMIT + 1)).toBe(LIMIT)
  })

  it('a reset whose reply was lost forgets the state once, not what was charged after it', async () => {
    const { proxied, other, through } = await processes()
    expect(await admitted(other, LIMIT)).toBe(LIMIT)
    const before = proxy.droppedReplies
    proxy.dropNextReply({ kind: 'reset' })
    const resetting = proxied.reset('r', 'ip:1').catch((error: unknown) => error)
    await dropped(before)
    expect(await admitted(other, LIMIT)).toBe(LIMIT)
    proxy.set({ kind: 'pass' })
    await resetting
    await reconnected(through, proxied)
    expect(await admitted(other, LIMIT)).toBe(0)
  })
})

// A HybridStore's sync pushes the units a process admitted: pushed twice, they count twice. ioredis
// sends a push again after a lost reply, and the store once merged a failed push's units into the
// next one, which Redis had maybe taken already.
describe('a HybridStore push applies once, however often it is sent', () => {
  let prefixes = 0

  /** A HybridStore on a client through the proxy: ioredis with `options`, or node-redis. */
  async function hybridThroughProxy(options: { maxRetriesPerRequest?: number | null } | 'node-redis' = {}) {
    const prefix = `lost-push:${process.pid}:${prefixes++}:`
    let through: LiveRulesOptions['client']
    let disconnect: () => unknown
    if (options === 'node-redis') {
      const client = createClient({ url: proxy.url })
      // node-redis emits the lost connection as an error, and reconnects.
      client.on('error', () => {})
      await client.connect()
      through = client
      disconnect = () => client.destroy()
    } else {
      const client = new Redis(proxy.url, options)
      await client.ping()
      through = client
      disconnect = () => client.disconnect()
    }
    const store = new HybridStore({ client: through, prefix, clock: () => T0, autoSync: false, syncTimeoutMs: 10_000 })
    const limiter = createLimiter({ store, rules, onWarning: () => {} })
    const onRedis = createLimiter({
      store: new RedisStore({ client: direct, prefix, clock: () => T0, refusalCache: false }),
      rules,
    })
    return {
      store,
      limiter,
      used: async () => LIMIT - ((await onRedis.peek('r', 'ip:1')).windows[0]?.remaining ?? 0),
      close: async () => {
        proxy.set({ kind: 'pass' })
        await limiter.close()
        await onRedis.close()
        disconnect()
      },
    }
  }

  it('counts a push sent again by ioredis after a lost reply once', async () => {
    const hybrid = await hybridThroughProxy()
    try {
      for (let i = 0; i < 4; i++) await hybrid.limiter.consume('r', 'ip:1')
      const before = proxy.droppedReplies
      proxy.dropNextReply()
      const report = await hybrid.store.syncNow()
      expect(proxy.droppedReplies).toBe(before + 1)
      expect(report.error).toBeUndefined()
      expect(await hybrid.used()).toBe(4)
    } finally {
      await hybrid.close()
    }
  })

  // A client that gives a command up as soon as its connection is lost, as the store then sees
  // it: ioredis told so, and node-redis, which never sends a command again.
  it.each([
    ['ioredis with maxRetriesPerRequest 0', { maxRetriesPerRequest: 0 }],
    ['node-redis', 'node-redis'],
  ] as const)(
    'counts once a push whose call failed after Redis took it, sent again at the next sync (%s)',
    async (_, client) => {
      const hybrid = await hybridThroughProxy(client)
      try {
        for (let i = 0; i < 4; i++) await hybrid.limiter.consume('r', 'ip:1')
        proxy.dropNextReply({ kind: 'reset' })
        expect((await hybrid.store.syncNow()).error).toBeDefined()
        expect(await hybrid.used()).toBe(4)
        proxy.set({ kind: 'pass' })
        await hybrid.limiter.consume('r', 'ip:1')
        await pollUntil('a sync reaches Redis again', 10_000, async () => {
          const report = await hybrid.store.syncNow()
          return report.error === undefined
            ? { done: true, value: undefined }
            : { done: false, state: String(report.error) }
        })
        // The failed push went again as it was, and the next consume with the next push.
        await hybrid.store.syncNow()
        expect(await hybrid.used()).toBe(5)
      } finally {
        await hybrid.close()
      }
    },
  )
})

// A strict HybridStore gives back the slice it holds unused. Sent twice, a give-back subtracts the
// slice twice from the count: a strict process and a RedisStore once admitted 121 in a window of 100.
describe('a strict HybridStore gives a slice back once, however often it is sent', () => {
  it('admits exactly the limit across a strict process and a RedisStore when the give-back reply is lost', async () => {
    const prefix = `lost-give-back:${process.pid}:`
    const hundred = { r: { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1h' }] } } as const
    const through = new Redis(proxy.url)
    await through.ping()
    const strict = new HybridStore({
      client: through,
      prefix,
      clock: () => T0,
      autoSync: false,
      consistency: 'strict',
      lease: { min: 20 },
      syncTimeoutMs: 10_000,
    })
    const strictLimiter = createLimiter({ store: strict, rules: hundred, onWarning: () => {} })
    const other = createLimiter({
      store: new RedisStore({ client: direct, prefix, clock: () => T0, refusalCache: false }),
      rules: hundred,
    })
    try {
      let admitted = 0
      for (let i = 0; i < 50; i++) if ((await other.consume('r', 'ip:1')).allowed) admitted++
      if ((await strictLimiter.consume('r', 'ip:1')).allowed) admitted++
      expect(strict.stats().reservedUnits).toBeGreaterThan(0)
      // Closing gives the slice back; its reply is lost, and ioredis sends it again.
      const before = proxy.droppedReplies
      proxy.dropNextReply()
      await strictLimiter.close()
      expect(proxy.droppedReplies).toBe(before + 1)
      for (let i = 0; i < 100; i++) if ((await other.consume('r', 'ip:1')).allowed) admitted++
      expect(admitted).toBe(100)
    } finally {
      proxy.set({ kind: 'pass' })
      await other.close()
      through.disconnect()
    }
  })
})
