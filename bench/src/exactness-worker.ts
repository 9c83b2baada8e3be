// One of several processes racing for one key. Reads contender ids, one a line, from stdin;
// fires its share of concurrent decisions on one identifier and prints how many were admitted.
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { contenderById } from './contenders/index.js'

const [url, perProcess, limit, periodMs] = process.argv.slice(2).map((arg, i) => (i === 0 ? arg : Number(arg))) as [
  string,
  number,
  number,
  number,
]
const client = new Redis(url)
await client.ping()
process.stdout.write(`${JSON.stringify({ ready: true })}\n`)

for await (const id of createInterface({ input: process.stdin })) {
  const decider = await contenderById(id).setup({ client, shape: 'one-window', limit, periodMs })
  const outcomes = await Promise.allSettled(
    Array.from({ length: perProcess }, () => decider.decide(['ip:203.0.113.7'])),
  )
  await decider.teardown()
  const admitted = outcomes.filter((o) => o.status === 'fulfilled' && o.value).length
  const failed = outcomes.filter((o) => o.status === 'rejected').length
  process.stdout.write(`${JSON.stringify({ admitted, failed })}\n`)
}
client.disconnect()
