// The load generator, in a process of its own: each stdin line {url, connections, seconds}
// runs autocannon and prints what it measured as one JSON line.
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'

export interface LoadRequest {
  url: string
  connections: number
  seconds: number
}

export interface LoadResult {
  requests: number
  seconds: number
  perSecond: number
  p50Ms: number
  p99Ms: number
  non2xx: number
  errors: number
  timeouts: number
  cpuSeconds: number
}

for await (const line of createInterface({ input: process.stdin })) {
  const request = JSON.parse(line) as LoadRequest
  const cpu = process.cpuUsage()
  const started = performance.now()
  const result = await autocannon({ url: request.url, connections: request.connections, duration: request.seconds })
  const seconds = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  const answer: LoadResult = {
    requests: result.requests.total,
    seconds,
    perSecond: result.requests.total / seconds,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    cpuSeconds: (used.user + used.system) / 1e6,
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`)
}
