// Packs every published package with plain `npm pack`, the way a registry user's tooling would
// (no pnpm rewriting of the manifest), and checks each tarball with publint and
// @arethetypeswrong/cli. The packages must be built first (`pnpm build`); packing runs each
// package's prepack, so a stale dist cannot slip through either.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const packages = ['core', 'express', 'fastify', 'koa', 'hono', 'nestjs', 'prometheus', 'opentelemetry', 'cli', 'admin']
const bin = (name) => join(root, 'node_modules', '.bin', name)
const destination = mkdtempSync(join(tmpdir(), 'tollgate-check-packages-'))
const run = (file, args, cwd) =>
  execFileSync(file, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' })

let failed = 0
try {
  for (const name of packages) {
    const dir = join(root, 'packages', name)
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
    const before = new Set(readdirSync(destination))
    run('npm', ['pack', '--silent', '--pack-destination', destination], dir)
    const tarball = readdirSync(destination).find((file) => !before.has(file))
    if (!tarball) throw new Error(`npm pack wrote no tarball for ${manifest.name}`)
    const path = join(destination, tarball)
    // attw checks the types a library ships; a package that is a command only (@tollgate/cli) ships none.
    const tools = [['publint', ['run', '--strict', path]]]
    if (manifest.types !== undefined) tools.push(['attw', ['--format', 'ascii', path]])
    else console.log(`${manifest.name}: attw: skipped, a command without types`)
    for (const [tool, args] of tools) {
      try {
        const output = run(bin(tool), args, root)
        const verdict = output.split('\n').find((line) => /all good|no problems/i.test(line)) ?? output.trim()
        console.log(`${manifest.name}: ${tool}: ${verdict.trim()}`)
      } catch (error) {
        failed++
        console.error(`${manifest.name}: ${tool} failed:\n${error.stdout ?? ''}`)
      }
    }
  }
} finally {
  rmSync(destination, { recursive: true, force: true })
}
if (failed > 0) {
  console.error(`${failed} package check(s) failed`)
  process.exit(1)
}
