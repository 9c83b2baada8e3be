import { ALGORITHMS, createLimiter, RedisStore } from '@tollgate/core'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'
import { bytesPerKey } from './bytes-per-key.js'
import { decisionsPerSecond } from './throughput.js'

const quick = process.argv.includes('--quick')
const durationMs = quick ? 1_000 : 3_000
const server = await spawnRedisServer()
const client = new Redis(server.url)
const identifiers = Array.from({ length: 10_000 }, (_, i) => `ip:10.0.${i >> 8}.${i & 255}`)

console.log(
  `Node ${process.version}, redis-server on ${server.url}, ${durationMs} ms per measure, 256 in flight, 10,000 identifiers`,
)
console.log('\n| algorithm | 1 window × 1 identifier (decisions/s) | 2 windows × 2 identifiers (decisions/s) |')
console.log('|---|---|---|')
for (const algorithm of ALGORITHMS) {
  const limiter = createLimiter({
    store: new RedisStore({ client, prefix: `bench:${algorithm}:` }),
    rules: {
      one: { algorithm, windows: [{ limit: 1_000_000, period: '1m' }] },
      two: {
        algorithm,
        windows: [
          { limit: 1_000_000, period: '1m' },
          { limit: 100_000, period: '1s' },
        ],
      },
    },
  })
  const single = await decisionsPerSecond(limiter, 'one', (i) => [identifiers[i % 10_000] as string], 256, durationMs)
  const pair = await decisionsPerSecond(
    limiter,
    'two',
    (i) => [identifiers[i % 10_000] as string, `user:${i % 5_000}`],
    256,
    durationMs,
  )
  console.log(`| ${algorithm} | ${Math.round(single)} | ${Math.round(pair)} |`)
}

console.log('\n| algorithm | bytes per key, 1 hit | bytes per key, 50 hits |')
console.log('|---|---|---|')
const one = await bytesPerKey(client, 1)
const fifty = await bytesPerKey(client, 50)
for (const algorithm of ALGORITHMS) console.log(`| ${algorithm} | ${one[algorithm]} | ${fifty[algorithm]} |`)

client.disconnect()
await server.stop()
