// Loaded with `node --import` before the bench (see package.json). It bundles the workspace's
// @tollgate/* sources with esbuild the way the published build is made (tsup: esbuild, no
// keepNames) and points those imports at the bundles. Without it tsx would run Tollgate from
// source with esbuild's keepNames on, whose `__name` calls cost Tollgate's MemoryStore path
// about a sixth of its CPU, a cost no installed copy pays; the incumbents run as published.
// TOLLGATE_BENCH_FROM=source measures the source as tsx runs it instead.
import { mkdirSync } from 'node:fs'
import { register } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { buildSync } from 'esbuild'

const PACKAGES = {
  core: '@tollgate/core',
  express: '@tollgate/express',
  fastify: '@tollgate/fastify',
  koa: '@tollgate/koa',
  prometheus: '@tollgate/prometheus',
  opentelemetry: '@tollgate/opentelemetry',
}

if (process.env.TOLLGATE_BENCH_FROM !== 'source') {
  const benchDir = dirname(dirname(fileURLToPath(import.meta.url)))
  // Child processes inherit the directory from their parent and reuse its bundles.
  let outdir = process.env.TOLLGATE_BENCH_BUILD
  if (!outdir) {
    outdir = join(benchDir, 'node_modules', '.cache', 'tollgate-build')
    mkdirSync(outdir, { recursive: true })
    buildSync({
      entryPoints: Object.fromEntries(
        Object.keys(PACKAGES).map((name) => [name, join(benchDir, '..', 'packages', name, 'src', 'index.ts')]),
      ),
      outdir,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      // The bench's own copies, as an application's would be; @tollgate/core stays one module.
      external: ['ioredis', 'express', 'fastify', 'koa', 'prom-client', '@opentelemetry/api', '@tollgate/core'],
      banner: {
        js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
      },
      logLevel: 'warning',
    })
    process.env.TOLLGATE_BENCH_BUILD = outdir
  }
  const urls = Object.fromEntries(
    Object.entries(PACKAGES).map(([name, specifier]) => [specifier, pathToFileURL(join(outdir, `${name}.mjs`)).href]),
  )
  register('./built-tollgate-hooks.mjs', import.meta.url, { data: urls })
}
