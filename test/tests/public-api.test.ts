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
  const referenced = source.referencedFiles.map((file) => publicDeclarations(join(dirname(path), file.fileName)))
  return [canonical(withoutPrivate), ...referenced].join('\n')
}

/**
 * The declarations in an order of their own: imports as written, then every other statement
 * sorted by its text, export lists last with their names sorted. The bundler writes declarations
 * in the order of the modules they came from, which moving a file changes and the API does not.
 */
function canonical(file: ts.SourceFile): string {
  const printer = ts.createPrinter({ removeComments: true })
  const print = (node: ts.Node): string => printer.printNode(ts.EmitHint.Unspecified, node, file)
  const imports: string[] = []
  const declarations: string[] = []
  const exports: string[] = []
  for (const statement of file.statements) {
    if (ts.isImportDeclaration(statement)) imports.push(print(statement))
    else if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      const names = statement.exportClause.elements.map(print).sort()
      exports.push(
        `export ${statement.isTypeOnly ? 'type ' : ''}{ ${names.join(', ')} }${statement.moduleSpecifier ? ` from ${print(statement.moduleSpecifier)}` : ''};`,
      )
    } else declarations.push(print(statement))
  }
  const references = file.referencedFiles.map((reference) => `/// <reference path="${reference.fileName}" />`)
  return `${[...references, ...imports, ...declarations.sort(), ...exports.sort()].join('\n')}\n`
}

function isPrivate(member: ts.ClassElement): boolean {
  return (ts.getCombinedModifierFlags(member as ts.Declaration) & ts.ModifierFlags.Private) !== 0
}
