import { createServer, type Server } from 'node:http'
import { connect, type Socket } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { type SpawnedRedis, spawnRedisServer, useRedis } from '@tollgate/test-support'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { startAdminServer } from '../src/index.js'
import { LiveStream, RETRY_AFTER_SECONDS } from '../src/live-stream.js'
import { type EventStream, openEventStream } from './event-stream.js'

const redis = useRedis()
let prefixes = 0
const opened: Array<{ close(): unknown }> = []

afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close()
})

/** Checks every 20 ms until `state` is `wanted`; fails after `timeoutMs`, saying what it last was. */
async function becomes<T>(what: string, wanted: T, state: () => T | Promise<T>, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const last = await state()
    if (last === wanted) return
    if (performance.now() > deadline) throw new Error(`${what}: still ${String(last)} after ${timeoutMs} ms`)
    await delay(20)
  }
}

async function events(url: string): Promise<EventStream> {
  const stream = await openEventStream(url)
  opened.push(stream)
  return stream
}

describe('the number of event streams', () => {
  it('is capped by maxStreams: the next is answered 503 with Retry-After, and served once one closes', async () => {
    const server = await startAdminServer({
      client: redis(),
      prefix: `live-stream${prefixes++}:`,
      port: 0,
      intervalMs: 50,
      maxStreams: 2,
    })
    opened.push(server)
    const first = await events(`${server.url}events`)
    await events(`${server.url}events`)

    const refused = await fetch(`${server.url}events`)
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe(String(RETRY_AFTER_SECONDS))
    expect(await refused.text()).toBe('the admin view serves at most 2 event streams at once (maxStreams)\n')

    first.close()
    // The server sees the close when its socket does: until then the cap still holds.
    await becomes('a third stream is served', 200, async () => {
      const response = await fetch(`${server.url}events`)
      await response.body?.cancel()
      return response.status
    })
  })

  it('refuses maxStreams, maxBufferedBytes and staleAfterMs out of range, by name', async () => {
    const client = redis()
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ maxStreams: 0 }, /startAdminServer option maxStreams must be an integer ≥ 1, got 0/],
      [{ maxStreams: 1.5 }, /option maxStreams must be an integer ≥ 1, got 1\.5/],
      [{ maxBufferedBytes: -1 }, /option maxBufferedBytes must be an integer ≥ 0, got -1/],
      [{ maxBufferedBytes: '1MB' }, /option maxBufferedBytes must be an integer ≥ 0, got "1MB"/],
      [{ staleAfterMs: 5 }, /option staleAfterMs must be an integer ≥ 10, got 5/],
      [{ staleAfterMs: 2 ** 31 }, /option staleAfterMs must be at most 2147483647, got 2147483648/],
    ]
    for (const [options, message] of cases) {
      await expect(startAdminServer({ client, port: 0, ...options } as never)).rejects.toThrow(message)
    }
  })
})

describe('a page that stops reading', () => {
  let server: Server | undefined
  afterEach(async () => {
    server?.closeAllConnections()
    await new Promise((resolve) => server?.close(resolve))
    server = undefined
  })

  it('is dropped once more than maxBufferedBytes wait unsent for it, and a page that reads is kept', async () => {
    // Updates of 512 KiB, so that the socket's own buffers fill within a few of them.
    const update = 'x'.repeat(512 * 1024)
    const maxBufferedBytes = 1024 * 1024
    const stream = new LiveStream({
      read: async () => update,
      intervalMs: 20,
      maxStreams: 10,
      maxBufferedBytes,
      staleAfterMs: 60_000,
    })
    opened.push(stream)
    let largestUnsent = 0
    server = createServer((req, res) => {
      stream.open(req, res)
      const write = res.write.bind(res) as (chunk: string) => boolean
      res.write = ((chunk: string) => {
        largestUnsent = Math.max(largestUnsent, res.writableLength)
        return write(chunk)
      }) as typeof res.write
    })
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }

    const reading = await events(`http://127.0.0.1:${port}/`)
    await reading.until('an update came', () => true)
    const stalled: Socket = connect(port, '127.0.0.1')
    opened.push({ close: () => stalled.destroy() })
    stalled.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
    // Reads nothing from here on: what the view sends it piles up in the kernel, then in the process.
    stalled.pause()
    await becomes('streams open once the stalled page connected', 2, () => stream.size)

    await becomes('streams open once the stalled page is dropped', 1, () => stream.size, 20_000)
    // Its socket is gone from the server too: nothing of it is held.
    await becomes(
      'connections the server holds',
      1,
      () =>
        new Promise<number>((resolve, reject) =>
          server?.getConnections((error, count) => (error ? reject(error) : resolve(count))),
        ),
    )
    // What waited for it never passed the bound by more than the update written on top of it.
    expect(largestUnsent).toBeLessThanOrEqual(maxBufferedBytes)

    const received = reading.events.length
    await reading.until('the reading page still gets updates', () => reading.events.length > received + 2)
  })
})

describe('a Redis that hangs', () => {
  let spawned: SpawnedRedis | undefined
  afterEach(async () => {
    spawned?.kill('SIGCONT')
    await spawned?.stop()
    spawned = undefined
  })

  it('makes the stream say stale while a read does not answer, and updates come again once Redis does', async () => {
    const redisServer = await spawnRedisServer()
    spawned = redisServer
    const client = new Redis(redisServer.url)
    // Far above what a read takes on a loaded machine, so that only the stop makes one stale.
    const staleAfterMs = 1_000
    const server = await startAdminServer({ client, port: 0, intervalMs: 50, staleAfterMs, onWarning: () => {} })
    try {
      const stream = await events(`${server.url}events`)
      await stream.until('a first update came', () => true)
      expect(stream.stale).toEqual([])

      const stoppedAt = Date.now()
      redisServer.kill('SIGSTOP')
      const stale = await stream.untilStale(`a read waited ${staleAfterMs} ms`, () => true)
      expect(stale.waitedMs).toBeGreaterThanOrEqual(staleAfterMs)
      // The read that hangs started after the last update's.
      expect(stale.sinceMs).toBeGreaterThanOrEqual(stream.events.at(-1)?.atMs as number)
      // It says so again while the read waits, each time longer: the stream itself is alive.
      const later = await stream.untilStale('a later stale event', (event) => event.waitedMs > stale.waitedMs)
      expect(later.sinceMs).toBe(stale.sinceMs)
      expect(stream.events.filter((event) => event.atMs > stoppedAt)).toEqual([])

      const before = stream.events.length
      redisServer.kill('SIGCONT')
      const recovered = await stream.until('an update after SIGCONT', (event) => stream.events.indexOf(event) >= before)
      expect(recovered.error).toBeUndefined()
      expect(recovered.seconds).toHaveLength(60)
      // The read that hung answered: the next ones start afresh, and no stale event follows.
      const staleEvents = stream.stale.length
      await stream.until('two more updates', (event) => stream.events.indexOf(event) >= before + 2)
      expect(stream.stale).toHaveLength(staleEvents)
    } finally {
      redisServer.kill('SIGCONT')
      await server.close()
      await client.quit()
    }
  })
})
