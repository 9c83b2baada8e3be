import { fileURLToPath } from 'node:url'
import { sixLogins, startReadmeServer } from '@tollgate/test-support/readme-server'
import { expect, it } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written: a server whose /login refuses the sixth try', async () => {
  // From the package directory, so 'hono' and '@hono/node-server' resolve as in the reader's app.
  const origin = await startReadmeServer({ packageDir, packageName: '@tollgate/hono' })
  const logins = await sixLogins(origin, { username: 'ada' })
  const statuses = logins.map((response) => response.status)
  const bodies = await Promise.all(logins.slice(0, 5).map((response) => response.text()))
  const last = logins.at(-1)
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  expect(new Set(bodies)).toEqual(new Set(['welcome, ada\n']))
  expect(last?.headers.get('content-type')).toBe('application/problem+json')
  expect(last?.headers.get('ratelimit-policy')).toBe('"login-60s";q=5;w=60, "login-3600s";q=20;w=3600')
  expect(await last?.json()).toMatchObject({ 'violated-policies': ['login-60s'], 'identifier-kinds': ['ip', 'user'] })
})
