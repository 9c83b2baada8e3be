import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
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
})
