import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

/**
 * Each package's public API as its built declarations give it to users, comments left out so
 * that wording changes do not count. A change to a snapshot is a change to the public API: read
 * it, then update it with `pnpm exec vitest run test/tests/public-api.test.ts -u`.
 */
describe.each(['core', 'express', 'fastify', 'koa'])('@tollgate/%s public API', (name) => {
  it('matches the committed snapshot of its built declarations', async () => {
    const path = join(repoRoot, 'packages', name, 'dist/index.d.ts')
    if (!existsSync(path)) throw new Error(`${path} is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, false)
    const api = ts.createPrinter({ removeComments: true }).printFile(source)
    await expect(api).toMatchFileSnapshot(join(repoRoot, 'test/api', `${name}.api.txt`))
  })
})
