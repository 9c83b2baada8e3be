import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { type DocSnippet, docSnippets, documentationFiles } from '../src/doc-snippets.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const testDir = join(repoRoot, 'test')

/**
 * What a user's project has: `strict`, Node's ESM resolution (`nodenext` in a `"type": "module"`
 * package, so top-level await compiles), Node's types; decorators as NestJS projects set them.
 */
const COMPILER_OPTIONS = {
  strict: true,
  noEmit: true,
  target: 'es2022',
  lib: ['es2022'],
  module: 'nodenext',
  moduleResolution: 'nodenext',
  types: ['node'],
  skipLibCheck: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
}

const HOW_TO_MARK = `A block that cannot compile on its own is marked in the Markdown just before its fence:
<!-- checked-with: import type { Redis } from 'ioredis'; declare const redis: Redis -->
for the names the text around it defined, or, for a fragment (a value shown, a shape with ...):
<!-- not-checked: why it cannot compile -->`

describe('the ```ts blocks of README.md, docs/*.md and packages/*/README.md', () => {
  const snippets = documentationFiles(repoRoot).flatMap((path) => docSnippets(repoRoot, path))
  let dir: string | undefined

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it('are found, each marked block saying why or with what', () => {
    expect(snippets.length).toBeGreaterThan(20)
    expect(snippets.some((snippet) => snippet.file === 'README.md' && snippet.code.includes('createLimiter'))).toBe(
      true,
    )
  })

  // Regression: `new Redis(process.env.REDIS_URL)` in the Quick start, docs/hybrid.md and
  // docs/live-rules.md fails under strict (no ioredis overload takes string | undefined), and no
  // test compiled the docs' TypeScript.
  it('type-check under strict, against the built packages as an app installs them', async () => {
    const checked = snippets.filter((snippet) => snippet.notChecked === undefined)
    dir = await projectWith(checked)
    const output = await typeCheck(dir)
    expect(errorsIn(output, checked), HOW_TO_MARK).toEqual([])
  }, 180_000)
})

/**
 * A project of one file per block, in the test package so that what the blocks import (ioredis,
 * express, fastify, koa…) resolves from its dependencies, and every `@tollgate/*` package through
 * its manifest's `exports`: the built `dist` and its declarations, as an installed copy.
 */
async function projectWith(snippets: readonly DocSnippet[]): Promise<string> {
  await mkdir(join(testDir, '.tmp'), { recursive: true })
  const dir = await mkdtemp(join(testDir, '.tmp', 'doc-snippets-'))
  await mkdir(join(dir, 'node_modules/@tollgate'), { recursive: true })
  for (const name of readdirSync(join(repoRoot, 'packages'))) {
    const manifest = join(repoRoot, 'packages', name, 'package.json')
    if (!existsSync(manifest)) continue
    const packageName = (JSON.parse(readFileSync(manifest, 'utf8')) as { name: string }).name
    if (!packageName.startsWith('@tollgate/')) continue
    if (!existsSync(join(repoRoot, 'packages', name, 'dist'))) {
      throw new Error(`packages/${name}/dist is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
    }
    await symlink(join(repoRoot, 'packages', name), join(dir, 'node_modules', packageName), 'dir')
  }
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'doc-snippets', private: true, type: 'module' }))
  const files = snippets.map((_, i) => `snippet-${i}.ts`)
  await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: COMPILER_OPTIONS, files }, null, 2))
  await Promise.all(
    snippets.map((snippet, i) =>
      writeFile(
        join(dir, files[i] as string),
        snippet.given === '' ? snippet.code : `${snippet.given}\n${snippet.code}`,
      ),
    ),
  )
  return dir
}

/** tsc's report on the project: its errors on stdout, whatever its exit code. */
function typeCheck(dir: string): Promise<string> {
  const tsc = createRequire(join(repoRoot, 'package.json')).resolve('typescript/bin/tsc')
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [tsc, '-p', 'tsconfig.json', '--pretty', 'false'],
      { cwd: dir, timeout: 120_000, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        // Exit 2 is tsc's "errors found"; anything else (killed, not started) is the test's failure.
        if (error && error.code !== 2) reject(new Error(`tsc failed: ${error.message}\n${stdout}\n${stderr}`))
        else resolve(stdout)
      },
    )
  })
}

/** tsc's errors, each at the Markdown line it is about: `docs/hybrid.md:11: TS2769 No overload matches this call.` */
function errorsIn(output: string, snippets: readonly DocSnippet[]): string[] {
  const errors: string[] = []
  for (const line of output.split('\n')) {
    const match = /^snippet-(\d+)\.ts\((\d+),(\d+)\): error (TS\d+): (.*)$/.exec(line)
    if (!match) {
      // A message's continuation lines, indented, belong to the error before them.
      if (line.startsWith(' ') && errors.length > 0) errors[errors.length - 1] += ` ${line.trim()}`
      else if (line.trim() !== '') errors.push(line)
      continue
    }
    const snippet = snippets[Number(match[1])] as DocSnippet
    const givenLines = snippet.given === '' ? 0 : snippet.given.split('\n').length
    const at = Number(match[2])
    const where =
      at <= givenLines
        ? `${snippet.file}:${snippet.line} (its checked-with)`
        : `${snippet.file}:${snippet.line + at - givenLines}`
    errors.push(`${where}: ${match[4]} ${match[5]}`)
  }
  return errors
}
