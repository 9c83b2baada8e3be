import { existsSync, realpathSync } from 'node:fs'
import { mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import * as common from '@nestjs/common'
import * as core from '@nestjs/core'
import * as platformExpress from '@nestjs/platform-express'
import * as platformFastify from '@nestjs/platform-fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runAdapterConformance } from '../../../../test/src/adapter-conformance.js'
import type { MakeHarness } from '../../../../test/src/adapter-harness.js'
import { makeNestHarness, type NestPackages, type NestPlatform } from '../../../../test/src/harness-nestjs.js'
import { installPacked, packPackage } from '../../../../test/src/pack-package.js'

// NestJS 10 is this directory's own dependency; the workspace builds and tests with NestJS 11. The
// adapter runs as a registry user on NestJS 10 gets it: packed, installed next to NestJS 10.
const here = dirname(fileURLToPath(import.meta.url))
const nestjsDir = join(here, '../..')
const coreDir = join(here, '../../../core')
const requireHere = createRequire(import.meta.url)
const NEST_PEERS = ['@nestjs/common', '@nestjs/core']

let tmp: string | undefined
let installed: string | undefined
let nest: NestPackages | undefined

beforeAll(async () => {
  if (!existsSync(join(nestjsDir, 'dist/index.js'))) {
    throw new Error(`${nestjsDir}/dist/index.js is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
  }
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'tollgate-nest10-')))
  const app = join(tmp, 'app')
  // Linked before the install, which keeps a dependency already there: NestJS 10 for the peers,
  // and the workspace's built core.
  const links: Array<[string, string]> = [
    ...NEST_PEERS.map((name): [string, string] => [
      name,
      dirname(realpathSync(requireHere.resolve(`${name}/package.json`))),
    ]),
    ['@tollgate/core', coreDir],
  ]
  for (const [name, target] of links) {
    const link = join(app, 'node_modules', name)
    await mkdir(dirname(link), { recursive: true })
    await symlink(target, link, 'dir')
  }
  installed = await installPacked(await packPackage(nestjsDir, await mkdtemp(join(tmp, 'pack-'))), nestjsDir, app)
  const tollgate = (await import(pathToFileURL(join(installed, 'dist/index.js')).href)) as NestPackages['tollgate']
  // NestJS 10's declarations differ from 11's in private members only.
  nest = { common, core, platformExpress, platformFastify, tollgate } as unknown as NestPackages
}, 120_000)

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true })
})

describe('the packed @tollgate/nestjs on NestJS 10', () => {
  it('resolves its peers to NestJS 10, as the app does', () => {
    const requireInstalled = createRequire(join(installed as string, 'package.json'))
    for (const name of NEST_PEERS) {
      const manifest = requireInstalled(`${name}/package.json`) as { version: string }
      expect(manifest.version).toMatch(/^10\./)
      expect(realpathSync(requireInstalled.resolve(name))).toBe(realpathSync(requireHere.resolve(name)))
    }
  })
})

const onNest10 =
  (platform: NestPlatform): MakeHarness =>
  (options) => {
    if (!nest) throw new Error('NestJS 10 and the packed adapter failed to install: see the first error')
    return makeNestHarness(platform, nest)(options)
  }

runAdapterConformance('NestJS 10 (Express platform)', onNest10('express'))
runAdapterConformance('NestJS 10 (Fastify platform)', onNest10('fastify'))
