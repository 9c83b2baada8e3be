import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written: a server whose /login refuses the sixth try with problem+json', async () => {
  const snippet = /```js\n([\s\S]*?)```/.exec(readFileSync(`${packageDir}README.md`, 'utf8'))?.[1]
  expect(snippet).toBeDefined()
  const source = (snippet as string).replace("'@tollgate/koa'", JSON.stringify(`${packageDir}src/index.ts`))
  // From the package directory, so 'koa' and '@koa/router' resolve as it would in the reader's app.
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    cwd: packageDir,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    const [line] = await Promise.race([
      once(createInterface({ input: child.stdout }), 'line'),
      once(child, 'exit').then(([code]) => Promise.reject(new Error(`the snippet exited with ${code}`))),
    ])
    const origin = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line)?.[1]
    expect(origin).toBeDefined()
    const statuses: number[] = []
    let last: Response | undefined
    for (let i = 0; i < 6; i++) {
      last = await fetch(`${origin}/login`, { method: 'POST' })
      statuses.push(last.status)
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
    expect(last?.headers.get('ratelimit-policy')).toBe('"login-60s";q=5;w=60, "login-3600s";q=20;w=3600')
    expect(last?.headers.get('content-type')).toBe('application/problem+json')
    expect(await last?.text()).toBe(
      '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Quota exceeded for login-60s; retry in 60 s.","violated-policies":["login-60s"],"identifier-kinds":["ip"],"retry-after":60}',
    )
  } finally {
    child.kill()
  }
})
