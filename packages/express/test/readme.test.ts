import { fileURLToPath } from 'node:url'
import { startReadmeServer } from '@tollgate/test-support/readme-server'
import { expect, it } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written: a server whose /login refuses the sixth try', async () => {
  const origin = await startReadmeServer({ packageDir, packageName: '@tollgate/express' })
  const statuses: number[] = []
  let last: Response | undefined
  for (let i = 0; i < 6; i++) {
    last = await fetch(`${origin}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'ada' }),
    })
    statuses.push(last.status)
  }
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  expect(last?.headers.get('content-type')).toMatch(/^application\/problem\+json/)
  expect(last?.headers.get('ratelimit-policy')).toBe('"login-60s";q=5;w=60, "login-3600s";q=20;w=3600')
  expect(await last?.json()).toMatchObject({ 'violated-policies': ['login-60s'] })
})
