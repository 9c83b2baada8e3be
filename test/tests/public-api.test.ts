import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

/**
 * Each package's public API as its built declarations give it to users, with the files they
 * reference (the Fastify augmentation), comments and private class members left out so that
 * wording and internals do not count. A change to a snapshot is a change to the public API: read
 * it, then update it with `pnpm exec vitest run test/tests/public-api.test.ts -u`.
 */
describe.each(['core', 'express', 'fastify', 'koa', 'hono', 'nestjs', 'prometheus', 'opentelemetry', 'admin'])(
  '@tollgate/%s public API',
  (name) => {
    it('matches the committed snapshot of its built declarations', async () => {
      const entry = join(repoRoot, 'packages', name, 'dist/index.d.ts')
      if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
      await expect(publicDeclarations(entry)).toMatchFileSnapshot(join(repoRoot, 'test/api', `${name}.api.txt`))
    })
  },
)

function publicDeclarations(path: string): string {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, false)
  const withoutPrivate = ts.transform(source, [
    (context) => (root) =>
      ts.visitEachChild(
        root,
        (node) =>
          ts.isClassDeclaration(node)
            ? context.factory.updateClassDeclaration(
                node,
                node.modifiers,
                node.name,
                node.typeParameters,
                node.heritageClauses,
                node.members.filter((member) => !isPrivate(member)),
              )
            : node,
        context,
      ),
  ]).transformed[0] as ts.SourceFile
  const printed = ts.createPrinter({ removeComments: true }).printFile(withoutPrivate)
  const referenced = source.referencedFiles.map((file) => publicDeclarations(join(dirname(path), file.fileName)))
  return [printed, ...referenced].join('\n')
}

function isPrivate(member: ts.ClassElement): boolean {
  return (ts.getCombinedModifierFlags(member as ts.Declaration) & ts.ModifierFlags.Private) !== 0
}
