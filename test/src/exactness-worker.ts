// One of several processes racing for one key. Started with `<redis URL | cluster:host:port,…>
// <perProcess>`; reads lines `<algorithm> <prefix> <nowMs|server>` from stdin, fires its share of
// concurrent consumes, and prints how many were admitted.
import { createInterface } from 'node:readline'
import { type AlgorithmName, createLimiter, RedisStore } from '@tollgate/core'
import { Cluster, Redis } from 'ioredis'

const [target, perProcess] = process.argv.slice(2) as [string, string]
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
  const [algorithm, prefix, time] = line.split(' ') as [AlgorithmName, string, string]
  const clock = time === 'server' ? undefined : () => Number(time)
  const limiter = createLimiter({
    store: new RedisStore({ client, prefix, ...(clock ? { clock } : {}) }),
    rules: { hot: { algorithm, windows: [{ limit: 1000, period: '1h' }] } },
    // 2,000 decisions queue up at once here; the subject is atomicity, not the wait's bound.
    storeTimeoutMs: 30_000,
    onStoreError: 'deny',
  })
  const decisions = await Promise.all(
    Array.from({ length: Number(perProcess) }, () => limiter.consume('hot', 'ip:203.0.113.7')),
  )
  const admitted = decisions.filter((d) => d.reason === 'ok').length
  const failed = decisions.filter((d) => d.reason === 'store-error-denied').length
  process.stdout.write(`${JSON.stringify({ admitted, failed })}\n`)
}
client.disconnect()
