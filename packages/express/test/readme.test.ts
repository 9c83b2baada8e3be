import { fileURLToPath } from 'node:url'
import { sixLogins, startReadmeServer } from '@tollgate/test-support/readme-server'
import { expect, it } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written: a server whose /login refuses the sixth try', async () => {
  const origin = await startReadmeServer({ packageDir, packageName: '@tollgate/express' })
  const logins = await sixLogins(origin, { username: 'ada' })
  const statuses = logins.map((response) => response.status)
  const last = logins.at(-1)
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  expect(last?.headers.get('content-type')).toMatch(/^application\/problem\+json/)
  expect(last?.headers.get('ratelimit-policy')).toBe('"login-60s";q=5;w=60, "login-3600s";q=20;w=3600')
  expect(await last?.json()).toMatchObject({ 'violated-policies': ['login-60s'] })
})
