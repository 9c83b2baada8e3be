import { fileURLToPath } from 'node:url'
import { sixLogins, startReadmeServer } from '@tollgate/test-support/readme-server'
import ts from 'typescript'
import { expect, it } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written: an app whose /login refuses the sixth try', async () => {
  const origin = await startReadmeServer({
    packageDir,
    packageName: '@tollgate/nestjs',
    fence: 'ts',
    // Compiled as a project set up as the README says compiles it: Nest's decorators are TypeScript's legacy ones.
    compile: (snippet) =>
      ts.transpileModule(snippet, {
        compilerOptions: { experimentalDecorators: true, module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      }).outputText,
  })
  const logins = await sixLogins(origin, { username: 'ada' })
  const statuses = logins.map((response) => response.status)
  const last = logins.at(-1)
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  expect(last?.headers.get('content-type')).toMatch(/^application\/problem\+json/)
  expect(last?.headers.get('ratelimit-policy')).toBe('"login-60s";q=5;w=60, "login-3600s";q=20;w=3600')
  expect(last?.headers.get('ratelimit')).toBe('"login-60s";r=0;t=60, "login-3600s";r=15;t=3600')
  expect(await last?.json()).toMatchObject({ 'violated-policies': ['login-60s'], 'identifier-kinds': ['ip', 'user'] })

  const items = await fetch(`${origin}/items`)
  expect(items.headers.get('ratelimit-policy')).toBe('"100-in-1m";q=100;w=60')
  const health = await fetch(`${origin}/health`)
  expect(health.status).toBe(200)
  expect(health.headers.get('ratelimit')).toBeNull()
})
