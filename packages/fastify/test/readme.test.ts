import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

describe('packages/fastify/README.md', () => {
  it('opens with a snippet that serves on 127.0.0.1 with the limits its comments describe', async () => {
    const readme = readFileSync(`${packageDir}README.md`, 'utf8')
    const snippet = /```js\n([\s\S]*?)```/.exec(readme)?.[1]
    expect(snippet).toContain('port: 3000')
    // Port 0 so the test never collides with a running server; tsx loads the workspace's TypeScript sources.
    const source = (snippet as string).replace('port: 3000', 'port: 0')
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
      cwd: packageDir,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    onTestFinished(async () => {
      if (child.exitCode === null) {
        child.kill()
        await once(child, 'exit')
      }
    })
    const [line] = (await Promise.race([
      once(child.stdout, 'data'),
      once(child, 'exit').then(([code]) => Promise.reject(new Error(`the snippet exited with code ${code}`))),
    ])) as [Buffer]
    const address = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m.exec(line.toString())?.[1]
    expect(address).toBeDefined()

    const home = await fetch(`${address}/`)
    expect(home.status).toBe(200)
    expect(home.headers.get('ratelimit-policy')).toBe('"100-in-1m";q=100;w=60')
    expect(home.headers.get('ratelimit')).toBe('"100-in-1m";r=99;t=60')

    const logins: number[] = []
    for (let i = 0; i < 6; i++) logins.push((await fetch(`${address}/login`, { method: 'POST' })).status)
    expect(logins).toEqual([200, 200, 200, 200, 200, 429])
  })
})
