import { fileURLToPath } from 'node:url'
import { sixLogins, startReadmeServer } from '@tollgate/test-support/readme-server'
import { expect, it } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written: a server whose /login refuses the sixth try with problem+json', async () => {
  const origin = await startReadmeServer({ packageDir, packageName: '@tollgate/koa' })
  const logins = await sixLogins(origin)
  const statuses = logins.map((response) => response.status)
  const last = logins.at(-1)
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  expect(last?.headers.get('ratelimit-policy')).toBe('"login-60s";q=5;w=60, "login-3600s";q=20;w=3600')
  expect(last?.headers.get('content-type')).toBe('application/problem+json')
  expect(await last?.text()).toBe(
    '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Quota exceeded for login-60s; retry in 60 s.","violated-policies":["login-60s"],"identifier-kinds":["ip"],"retry-after":60}',
  )
})
