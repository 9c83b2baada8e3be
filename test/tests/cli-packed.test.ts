import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { installPacked, type PackedPackage, packPackage, runCommand } from '../src/pack-package.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const cliDir = join(repoRoot, 'packages/cli')
const coreDir = join(repoRoot, 'packages/core')

describe('@tollgate/cli as installed from the registry', () => {
  let tmp: string
  let app: string
  let installed: string
  let packed: PackedPackage

  beforeAll(async () => {
    tmp = await realpath(await mkdtemp(join(tmpdir(), 'tollgate-cli-packed-')))
    app = join(tmp, 'app')
    // ioredis 6, as `npm install ioredis` gives it: the CLI's range takes it, so that the app holds one copy.
    const ioredis6 = dirname(createRequire(import.meta.url).resolve('ioredis6/package.json'))
    await mkdir(join(app, 'node_modules'), { recursive: true })
    await symlink(await realpath(ioredis6), join(app, 'node_modules/ioredis'), 'dir')
    for (const [name, dir] of [
      ['core', coreDir],
      ['cli', cliDir],
    ] as const) {
      const packDir = join(tmp, `pack-${name}`)
      await mkdir(packDir, { recursive: true })
      const pack = await packPackage(dir, packDir)
      const where = await installPacked(pack, dir, app)
      if (name === 'cli') {
        packed = pack
        installed = where
      }
    }
  }, 120_000)
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  it('ships its command and nothing of its sources', async () => {
    expect(packed.files).toEqual(['CHANGELOG.md', 'LICENSE', 'README.md', 'dist/bin.js', 'package.json'])
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8'))
    expect(manifest.bin).toEqual({ tollgate: './dist/bin.js' })
    expect((await readFile(join(installed, 'dist/bin.js'), 'utf8')).split('\n')[0]).toBe('#!/usr/bin/env node')
  })

  it('runs on the packed @tollgate/core: --version, and validate with no Redis', async () => {
    const bin = join(installed, 'dist/bin.js')
    const { version } = JSON.parse(await readFile(join(cliDir, 'package.json'), 'utf8'))
    expect((await runCommand(process.execPath, [bin, '--version'], { cwd: app, timeoutMs: 30_000 })).stdout).toBe(
      `${version}\n`,
    )
    const rules = join(tmp, 'rules.yaml')
    await writeFile(rules, 'limits:\n  - name: api\n    config:\n      - { limit: 5, period: 60 }\n')
    const { stdout } = await runCommand(process.execPath, [bin, '--json', 'rules', 'validate', rules], {
      cwd: app,
      timeoutMs: 30_000,
    })
    expect(JSON.parse(stdout)).toMatchObject({
      valid: true,
      rules: [{ name: 'api', windows: [{ limit: 5, periodMs: 60_000 }] }],
    })
  })

  it('talks to Redis through the ioredis 6 the app installed', async () => {
    const found = createRequire(join(installed, 'package.json'))('ioredis/package.json') as { version: string }
    expect(found.version).toMatch(/^6\./)
    const bin = join(installed, 'dist/bin.js')
    const rules = join(tmp, 'inspect.yaml')
    await writeFile(rules, 'limits:\n  - name: api\n    config:\n      - { limit: 5, period: 60 }\n')
    const prefix = `cli-packed:${process.pid}:`
    const { stdout } = await runCommand(
      process.execPath,
      [bin, '--redis', inject('redisUrl'), '--prefix', prefix, '--rules', rules, '--json', 'inspect', 'api', 'ip:1'],
      { cwd: app, timeoutMs: 30_000 },
    )
    expect(JSON.parse(stdout)).toMatchObject({ rule: 'api' })
  })
})
