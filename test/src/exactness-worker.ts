// One of several processes racing for the same keys. Started with `<redis URL | cluster:host:port,…>`;
// reads one ExactnessRound per line (JSON) from stdin, fires its consumes all at once, and prints
// an ExactnessResult line.
import { createInterface } from 'node:readline'
import { createLimiter, RedisStore } from '@tollgate/core'
import { Cluster, Redis } from 'ioredis'
import type { ExactnessResult, ExactnessRound } from './exactness-round.js'

const [target] = process.argv.slice(2) as [string]
const client = target.startsWith('cluster:')
  ? new Cluster(
      target
        .slice('cluster:'.length)
        .split(',')
        .map((address) => {
          const [host = '', port = ''] = address.split(':')
          return { host, port: Number(port) }
        }),
    )
  : new Redis(target)

for await (const line of createInterface({ input: process.stdin })) {
  const { algorithm, prefix, now, limit, decisions, identifiers } = JSON.parse(line) as ExactnessRound
  const limiter = createLimiter({
    store: new RedisStore({ client, prefix, ...(now === 'server' ? {} : { clock: () => now }) }),
    rules: { hot: { algorithm, windows: [{ limit, period: '1h' }] } },
    // Thousands of decisions queue up at once here; the subject is atomicity, not the wait's bound.
    storeTimeoutMs: 30_000,
    onStoreError: 'deny',
  })
  const made = await Promise.all(
    Array.from({ length: decisions }, (_, i) =>
      limiter.consume('hot', identifiers[i % identifiers.length] as readonly string[]),
    ),
  )
  const admittedPerSet = identifiers.map(
    (_, set) => made.filter((decision, i) => i % identifiers.length === set && decision.reason === 'ok').length,
  )
  const result: ExactnessResult = {
    admitted: admittedPerSet.reduce((sum, n) => sum + n, 0),
    admittedPerSet,
    failed: made.filter((d) => d.reason === 'store-error-denied').length,
  }
  process.stdout.write(`${JSON.stringify(result)}\n`)
}
client.disconnect()
