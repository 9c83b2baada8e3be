import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type { BenchConfig } from '../config.js'
import { loadCeilingScript } from '../contenders/raw-evalsha.js'
import type { MeasureContext } from './context.js'

const run = promisify(execFile)

export interface RedisBenchmarkCell {
  pipeline: number
  clients: number
  requests: number
  perSecond: number
  p99Ms: number
  command: string
}

export function redisBenchmarkUnits(_config: BenchConfig): number {
  return 2
}

/**
 * The physical limit of one Redis core for the ceiling's script: redis-benchmark, a C client,
 * sends EVALSHA of the same INCR + PEXPIRE script over 10,000 random keys. With `-P 16` each
 * connection pipelines 16 commands (Redis's limit); with `-P 1` it waits for each answer, as a
 * Node client does.
 */
export async function measureRedisBenchmark(context: MeasureContext): Promise<RedisBenchmarkCell[]> {
  const { config, admin, redisUrl, progress } = context
  const phase = progress.phase('redis-benchmark', redisBenchmarkUnits(config))
  const { port } = new URL(redisUrl)
  const sha = await loadCeilingScript(admin)
  const cells: RedisBenchmarkCell[] = []
  for (const pipeline of [config.redisBenchmark.pipeline, 1]) {
    const requests = pipeline === 1 ? config.redisBenchmark.requests / 2 : config.redisBenchmark.requests
    const args = ['-h', '127.0.0.1', '-p', port, '-q', '--csv', '-c', String(config.redisBenchmark.clients)]
    args.push('-n', String(requests), '-P', String(pipeline), '-r', '10000')
    args.push('evalsha', sha, '1', 'ceiling:__rand_int__', '60000')
    phase.note(`-P ${pipeline}`)
    await admin.flushall()
    const { stdout } = await run('redis-benchmark', args)
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    const row = stdout
      .trim()
      .split('\n')
      .map((line) => line.split('","').map((field) => field.replaceAll('"', '')))
      .find((fields) => fields[0]?.startsWith('evalsha'))
    if (!row) throw new Error(`redis-benchmark printed no evalsha line:\n${stdout}`)
    cells.push({
      pipeline,
      clients: config.redisBenchmark.clients,
      requests,
      perSecond: Number(row[1]),
      p99Ms: Number(row[6]),
      command: `redis-benchmark ${args.map((arg) => (arg === sha ? '<sha>' : arg === port ? '<port>' : arg)).join(' ')}`,
    })
    phase.tick()
  }
  await admin.flushall()
  phase.done()
  return cells
}
