import { createConnection, createServer } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { findFreePort, redisUrlForTests, type SpawnedRedis, spawnRedisServer, useRedis } from '../src/index.js'

const spawned: SpawnedRedis[] = []
const clients: Redis[] = []

async function spawnForTest(args?: string[]): Promise<SpawnedRedis> {
  const server = await spawnRedisServer({ args })
  spawned.push(server)
  return server
}

function connectTo(server: SpawnedRedis): Redis {
  const client = new Redis(server.url, { maxRetriesPerRequest: 1 })
  clients.push(client)
  return client
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.quit().catch(() => client.disconnect())))
  await Promise.all(spawned.splice(0).map((server) => server.stop()))
})

function connectionRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'))
  })
}

async function waitUntilRefused(port: number, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await connectionRefused(port)) return
    await delay(20)
  }
  throw new Error(`127.0.0.1:${port} still accepted connections ${timeoutMs} ms after stop()`)
}

describe('the Redis provided by global-setup', () => {
  const redis = useRedis()

  it('answers PING', async () => {
    expect(await redis().ping()).toBe('PONG')
  })
})

describe('spawnRedisServer', () => {
  it('starts a second server on another port, and stop() closes that port', async () => {
    const server = await spawnForTest()
    expect(server.port).not.toBe(Number(new URL(redisUrlForTests()).port))
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`)
    expect(await connectTo(server).ping()).toBe('PONG')

    await server.stop()

    await waitUntilRefused(server.port)
  })

  it('passes extra args to the server', async () => {
    const server = await spawnForTest(['--maxmemory', '10mb'])

    expect(await connectTo(server).config('GET', 'maxmemory')).toEqual(['maxmemory', String(10 * 1024 * 1024)])
  })

  it('names the binary it could not find', async () => {
    await expect(spawnRedisServer({ binary: 'tollgate-no-such-redis-server' })).rejects.toThrow(
      /tollgate-no-such-redis-server was not found on PATH/,
    )
  })
})

describe('findFreePort', () => {
  it('returns a port that can be bound on 127.0.0.1', async () => {
    const port = await findFreePort()
    const server = createServer()

    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ host: '127.0.0.1', port, exclusive: true }, resolve)
    })
    await new Promise<void>((resolve) => server.close(() => resolve()))

    expect(port).toBeGreaterThan(0)
  })
})
