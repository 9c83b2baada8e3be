import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { availableParallelism, loadavg, release, totalmem } from 'node:os'

/** How the run loaded Tollgate: see built-tollgate.mjs. */
export function tollgateBuild(): string {
  return process.env.TOLLGATE_BENCH_BUILD
    ? 'bundled by esbuild from the workspace source, as the published build is (no keepNames)'
    : 'run from the workspace source by tsx (esbuild keepNames on: slower than the published build)'
}

export interface Machine {
  cpus: number
  cpuModel: string
  memoryGiB: number
  os: string
  node: string
  redis: string
  /** 1-minute load average at the start and at the end of the run: other work on the machine shows here. */
  loadAverage: { start: number; end: number }
  packages: Record<string, string>
  tollgate: string
}

/** A load average above half the cores at either end of the run: other work shared the machine. */
export function wasBusy(m: Machine): boolean {
  return m.loadAverage.start > m.cpus * 0.5 || m.loadAverage.end > m.cpus * 0.5
}

const PACKAGES = [
  'ioredis',
  'rate-limiter-flexible',
  'express-rate-limit',
  'rate-limit-redis',
  '@fastify/rate-limit',
  'koa-ratelimit',
  'express',
  'fastify',
  'koa',
  'autocannon',
]

function cpuModel(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))
    return match?.[1]?.trim() ?? 'unknown'
  } catch {
    return 'unknown'
  }
}

function versions(): Record<string, string> {
  const require = createRequire(import.meta.url)
  const found: Record<string, string> = {}
  for (const name of PACKAGES) {
    try {
      found[name] = (require(`${name}/package.json`) as { version: string }).version
    } catch {
      // koa-ratelimit and some others do not export package.json; read it from disk instead.
      const entry = require.resolve(name)
      const root = entry.slice(0, entry.lastIndexOf(`/node_modules/${name}/`) + `/node_modules/${name}/`.length)
      found[name] = (JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { version: string }).version
    }
  }
  return found
}

export function describeMachine(redis: string, startLoad: number): Machine {
  return {
    cpus: availableParallelism(),
    cpuModel: cpuModel(),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `Linux ${release()}`,
    node: process.version,
    redis,
    loadAverage: { start: startLoad, end: loadavg()[0] as number },
    packages: versions(),
    tollgate: tollgateBuild(),
  }
}
