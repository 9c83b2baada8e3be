import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { installPacked, type PackedPackage, packPackage, runCommand } from '../src/pack-package.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const adminDir = join(repoRoot, 'packages/admin')
const coreDir = join(repoRoot, 'packages/core')

// Every file the page loads, then the page's own address without its slash (a redirect).
const BODY = `
const redis = new Redis(process.argv[2])
const server = await startAdminServer({ client: redis, prefix: 'packed-admin:', port: 0 })
const statuses = []
for (const path of ['', 'app.js', 'app.css', 'vendor/preact.js', 'vendor/preact-hooks.js', 'vendor/htm.js', 'vendor/uplot.js', 'vendor/uplot.css']) {
  const response = await fetch(server.url + path)
  statuses.push(path + ' ' + response.status + ' ' + (await response.text()).length)
}
await server.close()
redis.disconnect()
process.stdout.write(JSON.stringify(statuses))
`
const ESM = `import { startAdminServer } from '@tollgate/admin'\nimport { Redis } from 'ioredis'\n${BODY}`
const CJS = `const { startAdminServer } = require('@tollgate/admin')\nconst { Redis } = require('ioredis')\n;(async () => {\n${BODY}\n})()`

const CHECK_MTS = `import { type AdminHandler, adminHandler, startAdminServer } from '@tollgate/admin'
import { Redis } from 'ioredis'
const client = new Redis({ lazyConnect: true })
const view: AdminHandler = adminHandler({ client, showIdentifiers: true })
void view.close()
void startAdminServer({ client, port: 0, host: '127.0.0.1' })
// @ts-expect-error showIdentifiers is a boolean: fails if the declarations resolve to any
adminHandler({ client, showIdentifiers: 'yes' })
`
const CHECK_CTS = `import admin = require('@tollgate/admin')
import ioredis = require('ioredis')
const client = new ioredis.Redis({ lazyConnect: true })
const view: admin.AdminHandler = admin.adminHandler({ client, token: 'a-token-of-16-characters' })
void view.close()
// @ts-expect-error port is a number: fails if the declarations resolve to any
void admin.startAdminServer({ client, port: '9464' })
`

describe('@tollgate/admin as installed from the registry', () => {
  let tmp: string
  let app: string
  let packed: PackedPackage

  beforeAll(async () => {
    for (const dir of [coreDir, adminDir]) {
      if (!existsSync(join(dir, 'dist/index.js'))) {
        throw new Error(`${dir}/dist/index.js is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
      }
    }
    tmp = await realpath(await mkdtemp(join(tmpdir(), 'tollgate-packed-admin-')))
    app = join(tmp, 'app')
    for (const dir of [coreDir, adminDir]) {
      const pack = await packPackage(dir, await mkdtemp(join(tmp, 'pack-')))
      if (dir === adminDir) packed = pack
      await installPacked(pack, dir, app)
    }
    // ioredis came as core's peer dependency; Node's types are for the consumer programs.
    await mkdir(join(app, 'node_modules/@types'), { recursive: true })
    await symlink(join(repoRoot, 'node_modules/@types/node'), join(app, 'node_modules/@types/node'), 'dir')
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
    await writeFile(join(app, 'app.mjs'), ESM)
    await writeFile(join(app, 'app.cjs'), CJS)
    await writeFile(join(app, 'check.mts'), CHECK_MTS)
    await writeFile(join(app, 'check.cts'), CHECK_CTS)
  })

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  it('ships the page with the package', () => {
    expect(packed.files).toEqual(expect.arrayContaining(['client/index.html', 'client/app.js', 'client/app.css']))
  })

  it('serves the page and the libraries it resolves from its installed dependencies, from ESM and from CJS', async () => {
    const run = async (script: string) =>
      JSON.parse(
        (await runCommand(process.execPath, [script, inject('redisUrl')], { cwd: app, timeoutMs: 30_000 })).stdout,
      ) as string[]
    const [esm, cjs] = await Promise.all([run('app.mjs'), run('app.cjs')])
    for (const line of esm) expect(line).toMatch(/^\S* 200 [1-9]\d*$/)
    expect(esm).toHaveLength(8)
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
