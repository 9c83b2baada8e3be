import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import type { LoadRequest, LoadResult } from '../http/load.js'
import { FRAMEWORKS, type Framework, VARIANTS, type Variant } from '../http/variants.js'
import { rotate } from '../stats.js'
import type { MeasureContext } from './context.js'

export interface HttpCell {
  framework: Framework
  variant: Variant
  /** Per repetition. */
  perSecond: number[]
  p99Ms: number[]
  /** The server process's CPU per request, µs, per repetition. */
  serverCpuUs: number[]
  requests: number
  non2xx: number
  errors: number
}

export function httpUnits(config: BenchConfig): number {
  return FRAMEWORKS.length * VARIANTS.length * (1 + config.http.repetitions)
}

/**
 * Measure 3: one server process per framework × variant and one autocannon process, so that
 * neither shares an event loop with the other or with this orchestrator. Per framework every
 * server is warmed up once, then the variants take turns, in an order rotated each repetition,
 * Redis flushed before each run.
 */
export async function measureHttp(context: MeasureContext): Promise<HttpCell[]> {
  const { config, redisUrl, admin, progress } = context
  const phase = progress.phase('HTTP req/s', httpUnits(config))
  const load = new LineChild('http/load.ts', [])
  const cells: HttpCell[] = []
  try {
    for (const framework of FRAMEWORKS) {
      phase.note(`starting ${framework} servers`)
      const servers = new Map<Variant, { child: LineChild; url: string }>()
      try {
        for (const variant of VARIANTS) {
          const child = new LineChild('http/server.ts', [framework, variant, redisUrl])
          servers.set(variant, { child, url: '' })
        }
        for (const [variant, server] of servers) {
          const { port } = await server.child.receive<{ port: number }>()
          servers.set(variant, { ...server, url: `http://127.0.0.1:${port}/` })
        }
        const byVariant = new Map<Variant, HttpCell>()
        for (const variant of VARIANTS) {
          const cell: HttpCell = {
            framework,
            variant,
            perSecond: [],
            p99Ms: [],
            serverCpuUs: [],
            requests: 0,
            non2xx: 0,
            errors: 0,
          }
          byVariant.set(variant, cell)
          cells.push(cell)
          phase.note(`warm-up ${framework} ${variant}`)
          await admin.flushall()
          await load.request<LoadResult>(
            JSON.stringify({
              url: servers.get(variant)!.url,
              connections: config.http.connections,
              seconds: config.http.warmupSeconds,
            } satisfies LoadRequest),
          )
          phase.tick()
        }
        for (let rep = 0; rep < config.http.repetitions; rep++) {
          for (const variant of rotate(VARIANTS, rep)) {
            phase.note(`${framework} ${variant} rep ${rep + 1}`)
            const server = servers.get(variant)!
            await admin.flushall()
            const before = await server.child.request<{ cpuSeconds: number }>('cpu')
            const result = await load.request<LoadResult>(
              JSON.stringify({
                url: server.url,
                connections: config.http.connections,
                seconds: config.http.seconds,
              } satisfies LoadRequest),
            )
            const after = await server.child.request<{ cpuSeconds: number }>('cpu')
            const cell = byVariant.get(variant)!
            cell.perSecond.push(result.perSecond)
            cell.p99Ms.push(result.p99Ms)
            cell.serverCpuUs.push(((after.cpuSeconds - before.cpuSeconds) / Math.max(1, result.requests)) * 1e6)
            cell.requests += result.requests
            cell.non2xx += result.non2xx
            cell.errors += result.errors + result.timeouts
            phase.tick()
          }
        }
      } finally {
        await Promise.all([...servers.values()].map((server) => server.child.close()))
      }
    }
  } finally {
    await load.close()
    await admin.flushall()
  }
  phase.done()
  return cells
}
