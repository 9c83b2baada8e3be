import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPacked, type PackedPackage, packPackage, runCommand } from '../src/pack-package.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const coreDir = join(repoRoot, 'packages/core')

/** Value exports only (types vanish at runtime): a change here is a change to the public API. */
const PUBLIC_EXPORTS = [
  'ALGORITHMS',
  'DECISION_OUTCOMES',
  'DEFAULT_DURATION_BUCKETS',
  'DecisionCounts',
  'HEADERS_FORMATS',
  'HybridStore',
  'LiveRules',
  'MAX_CHAIN_LENGTH',
  'MAX_IDENTIFIERS',
  'MAX_TIMER_MS',
  'MAX_WINDOWS_PER_RULE',
  'MemoryStore',
  'OTHER_RULES',
  'REDIS_SCRIPTS',
  'RedisStore',
  'STORE_ERROR_KINDS',
  'TollgateArgumentError',
  'TollgateConfigError',
  'TollgateError',
  'byIpAndUser',
  'checkOptionsObject',
  'createLimiter',
  'createRateLimit',
  'createRouteRateLimit',
  'decisionOutcome',
  'decodeLockoutState',
  'describeValue',
  'formatDuration',
  'forwardedClientAddress',
  'hybridInstancesKey',
  'hybridStoreOf',
  'ipIdentifier',
  'loadRules',
  'onRulesEvents',
  'optionKeys',
  'parseDuration',
  'policyName',
  'quotaExceededProblem',
  'rateLimitHeaders',
  'readFleetProcesses',
  'readFleetSeconds',
  'readTopRefused',
  'shareFleetStats',
  'stateNameOf',
  'storeUnavailableProblem',
  'targetsOf',
  'userIdentifier',
  'wholeOption',
]

// Plain JavaScript shared by app.cjs and app.mjs, so both module systems run the same calls.
const REPORT = String.raw`
async function report(core, resolved) {
  const describeError = (error) => ({
    name: error.name,
    code: error.code,
    isError: error instanceof Error,
    isTypeError: error instanceof TypeError,
    isTollgateError: error instanceof core.TollgateError,
    isConfigError: error instanceof core.TollgateConfigError,
    isArgumentError: error instanceof core.TollgateArgumentError,
  })
  // A fixed clock: three decisions must not straddle the 1 s window however slow the machine.
  const limiter = core.createLimiter({
    store: new core.MemoryStore({ clock: () => 1_700_000_000_000 }),
    rules: { r: { windows: [{ limit: 2, period: '1s' }] } },
  })
  const allowed = []
  for (let i = 0; i < 3; i++) allowed.push((await limiter.consume('r', 'ip:203.0.113.7')).allowed)
  const argumentError = await limiter.consume('r', 'ip:203.0.113.7', { cost: -1 }).then(() => null, describeError)
  await limiter.close()
  let configError = null
  try {
    core.createLimiter({ rules: {} })
  } catch (error) {
    configError = describeError(error)
  }
  const results = {
    exports: Object.keys(core).sort(),
    allowed,
    ip: core.ipIdentifier('::ffff:203.0.113.7'),
    rules: core.loadRules('limits:\n  - name: a\n    config:\n      - { limit: 1, period: 1 }\n'),
    configError,
    argumentError,
  }
  process.stdout.write(JSON.stringify({ resolved, results }))
}
`

const APP_CJS = `const core = require('@tollgate/core')
${REPORT}
report(core, require.resolve('@tollgate/core'))
`

const APP_MJS = `import { fileURLToPath } from 'node:url'
import * as core from '@tollgate/core'
${REPORT}
await report(core, fileURLToPath(import.meta.resolve('@tollgate/core')))
`

const CHECK_MTS = `import { createLimiter, type Decision, TollgateConfigError } from '@tollgate/core'

const limiter = createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1s' }] } } })
const decision: Decision = await limiter.consume('r', 'ip:203.0.113.7')
export const allowed: boolean = decision.allowed
export const isConfigError = (error: unknown): boolean => error instanceof TollgateConfigError && error.code === 'TG_CONFIG'
// @ts-expect-error limit is a number: fails if the declarations resolve to any
createLimiter({ rules: { r: { windows: [{ limit: '2', period: '1s' }] } } })
await limiter.close()
`

const CHECK_CTS = `import core = require('@tollgate/core')

export async function allowed(): Promise<boolean> {
  const limiter: core.Limiter = core.createLimiter({ rules: { r: { windows: [{ limit: 2, period: '1s' }] } } })
  const decision: core.Decision = await limiter.consume('r', 'ip:203.0.113.7')
  await limiter.close()
  return decision.allowed
}
// @ts-expect-error limit is a number: fails if the declarations resolve to any
core.createLimiter({ rules: { r: { windows: [{ limit: '2', period: '1s' }] } } })
`

interface Report {
  /** The file `@tollgate/core` resolved to. */
  resolved: string
  results: { exports: string[] } & Record<string, unknown>
}

describe('@tollgate/core as installed from the registry', () => {
  let tmp: string
  let app: string
  let installed: string
  let packed: PackedPackage

  beforeAll(async () => {
    if (!existsSync(join(coreDir, 'dist/index.js'))) {
      throw new Error('packages/core/dist/index.js is missing: run `pnpm build` first (`pnpm test` does)')
    }
    // realpath: on macOS tmpdir() is a symlink, and Node reports resolved paths.
    tmp = await realpath(await mkdtemp(join(tmpdir(), 'tollgate-packed-')))
    app = join(tmp, 'app')
    const packDir = join(tmp, 'pack')
    await mkdir(packDir, { recursive: true })
    packed = await packPackage(coreDir, packDir)
    installed = await installPacked(packed, coreDir, app)

    const typesNode = join(app, 'node_modules/@types/node')
    await mkdir(join(app, 'node_modules/@types'), { recursive: true })
    await symlink(join(repoRoot, 'node_modules/@types/node'), typesNode, 'dir')
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
    await writeFile(join(app, 'app.cjs'), APP_CJS)
    await writeFile(join(app, 'app.mjs'), APP_MJS)
    await writeFile(join(app, 'check.mts'), CHECK_MTS)
    await writeFile(join(app, 'check.cts'), CHECK_CTS)
  })

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  it('publishes exports that point at dist, with types for import and require', async () => {
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8'))
    expect(manifest.exports).toEqual({
      '.': {
        import: { types: './dist/index.d.ts', default: './dist/index.js' },
        require: { types: './dist/index.d.cts', default: './dist/index.cjs' },
      },
      './package.json': './package.json',
    })
    expect(manifest).toMatchObject({
      main: './dist/index.cjs',
      module: './dist/index.js',
      types: './dist/index.d.ts',
    })
  })

  // Regression: 1.5 MB of source maps, with the sources inside them, made most of a 2.4 MB
  // package; the maps pointed at sources it does not ship, and dist reads as written.
  it('ships dist and leaves out sources, source maps and Lua', () => {
    expect(packed.files).toEqual(
      expect.arrayContaining(['dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/index.d.cts']),
    )
    expect(packed.files.filter((file) => file.startsWith('src/'))).toEqual([])
    expect(packed.files.filter((file) => file.endsWith('.lua'))).toEqual([])
    expect(packed.files.filter((file) => file.endsWith('.map'))).toEqual([])
  })

  it('gives CJS and ESM the same public API and the same decisions', async () => {
    const [cjs, esm] = await Promise.all([runApp(app, 'app.cjs'), runApp(app, 'app.mjs')])

    expect(cjs.resolved).toBe(join(installed, 'dist/index.cjs'))
    expect(esm.resolved).toBe(join(installed, 'dist/index.js'))
    expect(cjs.results.exports).toEqual(PUBLIC_EXPORTS)
    expect(esm.results.exports).toEqual(PUBLIC_EXPORTS)
    expect(cjs.results).toEqual(esm.results)
    expect(cjs.results).toEqual({
      exports: PUBLIC_EXPORTS,
      allowed: [true, true, false],
      ip: 'ip:203.0.113.7',
      rules: { a: { windows: [{ limit: 1, period: '1s' }] } },
      configError: {
        name: 'TollgateConfigError',
        code: 'TG_CONFIG',
        isError: true,
        isTypeError: false,
        isTollgateError: true,
        isConfigError: true,
        isArgumentError: false,
      },
      argumentError: {
        name: 'TollgateArgumentError',
        code: 'TG_INVALID_ARGUMENT',
        isError: true,
        isTypeError: true,
        isTollgateError: false,
        isConfigError: false,
        isArgumentError: true,
      },
    })
  })

  it('typechecks a consumer under nodenext, from ESM and from CJS', async () => {
    const tsc = createRequire(join(repoRoot, 'package.json')).resolve('typescript/bin/tsc')
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext']
    // A Node consumer's lib, as in tsconfig.base.json: the default adds the DOM, whose lib check costs seconds.
    const checks = ['--skipLibCheck', 'false', '--lib', 'es2022', '--types', 'node', 'check.mts', 'check.cts']
    const { stdout } = await runCommand(process.execPath, [tsc, ...flags, ...checks], { cwd: app, timeoutMs: 30_000 })
    expect(stdout).toBe('')
  })
})

async function runApp(app: string, script: string): Promise<Report> {
  const { stdout } = await runCommand(process.execPath, [script], { cwd: app, timeoutMs: 30_000 })
  return JSON.parse(stdout) as Report
}
