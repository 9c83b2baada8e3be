import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)
const repoRoot = fileURLToPath(new URL('../../', import.meta.url))
const core = `${repoRoot}packages/core/`
const testPackage = `${repoRoot}test/`

describe('packages/core/README.md', () => {
  it('opens with a snippet that runs as written and prints what its comment says', async () => {
    const readme = readFileSync(`${core}README.md`, 'utf8')
    const snippet = /```js\n([\s\S]*?)```/.exec(readme)?.[1]
    expect(snippet).toBeDefined()
    // The built package, as a user importing '@tollgate/core' would get it (pnpm test builds first).
    const source = (snippet as string).replace("'@tollgate/core'", JSON.stringify(`${core}dist/index.js`))
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', source], { timeout: 20_000 })
    expect(stdout.trim().split('\n')).toEqual([
      '1 true []',
      '2 true []',
      '3 true []',
      '4 true []',
      '5 true []',
      "6 false [ 'ip:203.0.113.7 3000 ms', 'user:42 3000 ms' ]",
    ])
  })
})

describe('README.md', () => {
  const readme = readFileSync(`${repoRoot}README.md`, 'utf8')
  const blocksUnder = (heading: string) =>
    [...readme.slice(readme.indexOf(heading)).matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] as string)

  /** The Quick start's limiter, in memory as its comment allows: the snippets below decide with it. */
  function quickStartLimiter(): string {
    const limiter = /^[\s\S]*?\n\}\)\n/.exec(blocksUnder('## Quick start')[0] ?? '')?.[0]
    expect(limiter).toContain('const limiter = createLimiter(')
    const inMemory = (limiter as string).replace(/^ {2}store: .*\n/m, '')
    expect(inMemory).not.toBe(limiter)
    return inMemory
  }

  /** Runs the limiter, then a framework snippet with `stubs` for the handlers it names, then `checks`, which print JSON. */
  async function runSnippet(snippet: string, stubs: string, checks: string): Promise<unknown> {
    const source = `import { once } from 'node:events'\n${quickStartLimiter()}\n${stubs}\n${snippet}\n${checks}\nprocess.exit(0)\n`
    // From the test package, which depends on every framework and adapter; tsx loads the workspace's sources.
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
      cwd: testPackage,
      timeout: 30_000,
    })
    return JSON.parse(stdout)
  }

  const [express, fastify, koa, hono] = blocksUnder('## In a web framework')

  it('has an Express snippet that runs with the Quick start limiter', async () => {
    const result = await runSnippet(
      express as string,
      'const login = (_req, res) => { res.json({ ok: true }) }',
      `const server = app.listen(0, '127.0.0.1')
await once(server, 'listening')
const base = 'http://127.0.0.1:' + server.address().port
const login1 = await fetch(base + '/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"ada"}' })
const api = await fetch(base + '/api/items')
console.log(JSON.stringify({ login: [login1.status, login1.headers.get('ratelimit')], api: api.headers.get('ratelimit') }))`,
    )
    expect(result).toEqual({
      login: [200, '"auth.createToken-60s";r=19;t=60, "auth.createToken-3s";r=4;t=3'],
      api: '"100-in-1m";r=99;t=60',
    })
  })

  // Regression: the Fastify snippet charged rule upload.bytes, which the Quick start's rules lacked,
  // so the app failed at ready().
  it('has a Fastify snippet that runs with the Quick start limiter and refuses a chunked upload', async () => {
    const result = await runSnippet(
      fastify as string,
      'const upload = async () => ({ ok: true })\nconst health = async () => ({ ok: true })',
      `const { Readable } = await import('node:stream')
await app.ready()
const post = (payload) => app.inject({ method: 'POST', url: '/upload', headers: { 'content-type': 'text/plain' }, payload })
const sized = await post('x'.repeat(1000))
const chunked = await post(Readable.from(['x'.repeat(1000)]))
const healthy = await app.inject('/health')
console.log(JSON.stringify({ upload: [sized.statusCode, sized.headers.ratelimit], chunked: chunked.statusCode, health: [healthy.statusCode, healthy.headers.ratelimit ?? null] }))`,
    )
    expect(result).toEqual({
      upload: [200, '"upload.bytes-60s";r=9999000;t=60'],
      chunked: 411,
      health: [200, null],
    })
  })

  it('has a Koa snippet that runs with the Quick start limiter', async () => {
    const result = await runSnippet(
      koa as string,
      '',
      `app.use((ctx) => { ctx.body = 'ok' })
const server = app.listen(0, '127.0.0.1')
await once(server, 'listening')
const response = await fetch('http://127.0.0.1:' + server.address().port + '/')
console.log(JSON.stringify([response.status, response.headers.get('ratelimit-policy')]))`,
    )
    expect(result).toEqual([200, '"api-60s";q=1000;w=60'])
  })

  it('has a Hono snippet that runs with the Quick start limiter on @hono/node-server', async () => {
    const result = await runSnippet(
      hono as string,
      '',
      `app.get('/api/items', (c) => c.text('ok'))
app.get('/health', (c) => c.text('ok'))
const { serve } = await import('@hono/node-server')
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
await once(server, 'listening')
const base = 'http://127.0.0.1:' + server.address().port
const api = await fetch(base + '/api/items')
const health = await fetch(base + '/health')
console.log(JSON.stringify({ api: [api.status, api.headers.get('ratelimit-policy')], health: health.headers.get('ratelimit') }))`,
    )
    expect(result).toEqual({ api: [200, '"api-60s";q=1000;w=60'], health: null })
  })
})
