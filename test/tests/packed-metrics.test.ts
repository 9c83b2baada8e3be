import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPacked, packPackage, runCommand } from '../src/pack-package.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

interface MetricsApp {
  /** Imports, as ESM and as CJS; both scripts then run the same body, which prints JSON. */
  esm: string
  cjs: string
  body: string
  /** Packages the app imports beside the packed ones, linked from the workspace package's own. */
  extra: string[]
  /** A consumer that must type-check, as .mts and as .cts. */
  checkMts: string
  checkCts: string
}

// Three decisions against a limit of 2, then what the metrics say of them.
const DECIDE = `
const limiter = createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1m' }] } } })
`

const PACKAGES: Record<'prometheus' | 'opentelemetry', MetricsApp> = {
  prometheus: {
    esm: `import { createLimiter } from '@tollgate/core'\nimport { prometheusMetrics } from '@tollgate/prometheus'\nimport { Registry } from 'prom-client'`,
    cjs: `const { createLimiter } = require('@tollgate/core')\nconst { prometheusMetrics } = require('@tollgate/prometheus')\nconst { Registry } = require('prom-client')`,
    body: `${DECIDE}
const registry = new Registry()
prometheusMetrics(limiter, { registry })
for (let i = 0; i < 3; i++) await limiter.consume('r', 'ip:203.0.113.7')
const text = await registry.metrics()
await limiter.close()
process.stdout.write(JSON.stringify(text.split('\\n').filter((line) => /^tollgate_decisions_total.* [1-9]/.test(line))))
`,
    extra: [],
    checkMts: `import { createLimiter } from '@tollgate/core'
import { type PrometheusMetrics, prometheusMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
const limiter = createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1m' }] } } })
const metrics: PrometheusMetrics = prometheusMetrics(limiter, { registry: new Registry(), maxRules: 50 })
metrics.close()
// @ts-expect-error maxRules is a number: fails if the declarations resolve to any
prometheusMetrics(limiter, { maxRules: '50' })
`,
    checkCts: `import core = require('@tollgate/core')
import tollgate = require('@tollgate/prometheus')
const limiter: core.Limiter = core.createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1m' }] } } })
const metrics: tollgate.PrometheusMetrics = tollgate.prometheusMetrics(limiter, { timeEvery: 10 })
metrics.close()
// @ts-expect-error timeEvery is a number: fails if the declarations resolve to any
tollgate.prometheusMetrics(limiter, { timeEvery: 'often' })
`,
  },
  opentelemetry: {
    esm: `import { createLimiter } from '@tollgate/core'\nimport { openTelemetryMetrics } from '@tollgate/opentelemetry'\nimport { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics'`,
    cjs: `const { createLimiter } = require('@tollgate/core')\nconst { openTelemetryMetrics } = require('@tollgate/opentelemetry')\nconst { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } = require('@opentelemetry/sdk-metrics')`,
    body: `${DECIDE}
const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 60_000 })
const meterProvider = new MeterProvider({ readers: [reader] })
openTelemetryMetrics(limiter, { meterProvider })
for (let i = 0; i < 3; i++) await limiter.consume('r', 'ip:203.0.113.7')
const { resourceMetrics } = await reader.collect()
const requests = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((metric) => metric.descriptor.name === 'tollgate.rate_limiting.requests')
await limiter.close()
await meterProvider.shutdown()
process.stdout.write(JSON.stringify(requests.dataPoints.filter((point) => point.value > 0).map((point) => point.attributes['tollgate.rate_limiting.result'] + ' ' + point.value)))
`,
    extra: ['@opentelemetry/sdk-metrics'],
    checkMts: `import { createLimiter } from '@tollgate/core'
import { type OpenTelemetryMetrics, openTelemetryMetrics } from '@tollgate/opentelemetry'
const limiter = createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1m' }] } } })
const metrics: OpenTelemetryMetrics = openTelemetryMetrics(limiter, { spanAttributes: false })
metrics.close()
// @ts-expect-error spanAttributes is a boolean: fails if the declarations resolve to any
openTelemetryMetrics(limiter, { spanAttributes: 'no' })
`,
    checkCts: `import core = require('@tollgate/core')
import tollgate = require('@tollgate/opentelemetry')
const limiter: core.Limiter = core.createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1m' }] } } })
const metrics: tollgate.OpenTelemetryMetrics = tollgate.openTelemetryMetrics(limiter, { maxRules: 5 })
metrics.close()
// @ts-expect-error maxRules is a number: fails if the declarations resolve to any
tollgate.openTelemetryMetrics(limiter, { maxRules: 'five' })
`,
  },
}

const EXPECTED = {
  prometheus: [
    'tollgate_decisions_total{rule="r",outcome="allowed"} 2',
    'tollgate_decisions_total{rule="r",outcome="limited"} 1',
  ],
  opentelemetry: ['allowed 2', 'limited 1'],
}

describe.each(Object.entries(PACKAGES))('@tollgate/%s as installed from the registry', (name, metrics) => {
  const packageDir = join(repoRoot, 'packages', name)
  const coreDir = join(repoRoot, 'packages/core')
  let tmp: string
  let app: string

  beforeAll(async () => {
    for (const dir of [coreDir, packageDir]) {
      if (!existsSync(join(dir, 'dist/index.js'))) {
        throw new Error(`${dir}/dist/index.js is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
      }
    }
    tmp = await realpath(await mkdtemp(join(tmpdir(), `tollgate-packed-${name}-`)))
    app = join(tmp, 'app')
    // Core first: the package's dependency on it is then the packed core, not the workspace's.
    for (const dir of [coreDir, packageDir]) {
      const packDir = await mkdtemp(join(tmp, 'pack-'))
      await installPacked(await packPackage(dir, packDir), dir, app)
    }
    const fromPackage = createRequire(join(packageDir, 'package.json'))
    for (const extra of metrics.extra) {
      const target = join(app, 'node_modules', extra)
      await mkdir(dirname(target), { recursive: true })
      await symlink(await realpath(dirname(fromPackage.resolve(`${extra}/package.json`))), target, 'dir')
    }
    await mkdir(join(app, 'node_modules/@types'), { recursive: true })
    await symlink(join(repoRoot, 'node_modules/@types/node'), join(app, 'node_modules/@types/node'), 'dir')
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
    await writeFile(join(app, 'app.mjs'), `${metrics.esm}\n${metrics.body}`)
    await writeFile(join(app, 'app.cjs'), `${metrics.cjs}\n;(async () => {\n${metrics.body}\n})()`)
    await writeFile(join(app, 'check.mts'), metrics.checkMts)
    await writeFile(join(app, 'check.cts'), metrics.checkCts)
  })

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  it('depends on @tollgate/core by a range npm can install, with exports that point at dist', async () => {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules/@tollgate', name, 'package.json'), 'utf8'))
    expect(manifest.dependencies['@tollgate/core']).toMatch(/^\^\d+\.\d+\.\d+$/)
    expect(manifest.exports['.']).toEqual({
      import: { types: './dist/index.d.ts', default: './dist/index.js' },
      require: { types: './dist/index.d.cts', default: './dist/index.cjs' },
    })
  })

  it('counts the same decisions from ESM and from CJS', async () => {
    const [esm, cjs] = await Promise.all([runApp(app, 'app.mjs'), runApp(app, 'app.cjs')])
    expect(esm).toEqual(EXPECTED[name as keyof typeof EXPECTED])
    expect(cjs).toEqual(esm)
  })

  it('typechecks one consumer program that imports it from ESM and from CJS, under nodenext', async () => {
    const tsc = createRequire(join(repoRoot, 'package.json')).resolve('typescript/bin/tsc')
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext']
    const checks = ['--skipLibCheck', 'false', '--lib', 'es2022', '--types', 'node', 'check.mts', 'check.cts']
    const { stdout } = await runCommand(process.execPath, [tsc, ...flags, ...checks], { cwd: app, timeoutMs: 60_000 })
    expect(stdout).toBe('')
  })
})

async function runApp(app: string, script: string): Promise<string[]> {
  const { stdout } = await runCommand(process.execPath, [script], { cwd: app, timeoutMs: 30_000 })
  return JSON.parse(stdout) as string[]
}
