import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sources(path)
    return path.endsWith('.ts') ? [path] : []
  })
}

it('documents every error and warning code the packages use in docs/errors.md, and no other', () => {
  const used = new Set<string>()
  for (const pkg of ['core', 'express', 'fastify', 'koa', 'prometheus', 'opentelemetry']) {
    for (const file of sources(join(repoRoot, 'packages', pkg, 'src'))) {
      for (const [, code] of readFileSync(file, 'utf8').matchAll(/'(TG_[A-Z_]+)'/g)) used.add(code as string)
    }
  }
  const documented = new Set(
    [...readFileSync(join(repoRoot, 'docs/errors.md'), 'utf8').matchAll(/^### (TG_[A-Z_]+)$/gm)].map(
      ([, code]) => code,
    ),
  )
  expect([...used].sort()).toEqual([...documented].sort())
  expect(used.size).toBeGreaterThan(5)
})
