// docs/migrating.md's snippets run as written: each code block's "after" part (the whole block
// when it has none) is put between what the text around it takes as given (an `app`, a Redis
// client, a `login` handler) and a probe that sends it requests, then run by Node in a process of
// its own; the probe's findings are checked here. A block with no run named below fails the test.
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const GUIDE = join(repoRoot, 'docs/migrating.md')
/** A database of its own: the snippets use the default prefix, which other tests' keys share on database 0. */
const DATABASE = 7

/** One code block of the guide: the section it stands in, its number there, and its code. */
interface Block {
  readonly id: string
  readonly language: 'js' | 'ts'
  readonly code: string
  readonly notChecked: boolean
}

function guideBlocks(text: string): Block[] {
  const lines = text.split('\n')
  const blocks: Block[] = []
  let section = ''
  let inSection = 0
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string
    if (line.startsWith('## ')) {
      section = line.slice(3)
      inSection = 0
      continue
    }
    const opening = /^```(js|ts)$/.exec(line)
    if (!opening) continue
    const body: string[] = []
    let end = i + 1
    while (end < lines.length && lines[end] !== '```') body.push(lines[end++] as string)
    let before = i - 1
    while (before >= 0 && (lines[before] as string).trim() === '') before--
    blocks.push({
      id: `${section} #${++inSection}`,
      language: opening[1] as 'js' | 'ts',
      code: body.join('\n'),
      notChecked: (lines[before] ?? '').startsWith('<!-- not-checked:'),
    })
    i = end
  }
  return blocks
}

/** The part of a block a reader adopts: after its `// after` line, or the whole block. */
function adopted(code: string): string {
  const lines = code.split('\n')
  const after = lines.findIndex((line) => line.startsWith('// after'))
  return after < 0 ? code : lines.slice(after + 1).join('\n')
}

/** What a block's text takes as given, and the probe that reports, as one JSON line, what the code did. */
interface Run {
  readonly given: string
  readonly probe: string
  /** Files the code reads from its working directory. */
  readonly files?: Record<string, string>
  readonly expected: unknown
}

const EXPRESS = "import express from 'express'\nconst app = express()"
const REDIS = "import { Redis } from 'ioredis'\nconst redis = new Redis(process.env.REDIS_URL)"

/** Requests to `path` of the Node HTTP server `listen` makes, counted by status; the first response's policy. */
function probeServer(listen: string, requests: number, init = '{}', path = '/'): string {
  return `
const server = ${listen}
await new Promise((resolve) => (server.listening ? resolve() : server.once('listening', resolve)))
const url = \`http://127.0.0.1:\${server.address().port}${path}\`
const statuses = {}
let policy
for (let i = 0; i < ${requests}; i++) {
  const response = await fetch(url, ${init})
  statuses[response.status] = (statuses[response.status] ?? 0) + 1
  policy ??= response.headers.get('ratelimit-policy')
}
console.log(JSON.stringify({ statuses, policy }))
process.exit(0)
`
}

const RUNS: Record<string, Run> = {
  'From express-rate-limit #1': {
    given: EXPRESS,
    probe: `app.get('/', (req, res) => res.send('ok'))\n${probeServer("app.listen(0, '127.0.0.1')", 101)}`,
    expected: { statuses: { 200: 100, 429: 1 }, policy: '"100-in-15m";q=100;w=900' },
  },
  'From express-rate-limit #2': {
    given: `${EXPRESS}\nimport { rateLimit } from '@tollgate/express'`,
    // A header from a peer that is no trusted proxy: the warning it would give is turned off.
    probe: `app.get('/', (req, res) => res.send('ok'))\n${probeServer(
      "app.listen(0, '127.0.0.1')",
      101,
      "{ headers: { 'x-forwarded-for': '198.51.100.7' } }",
    )}`,
    expected: { statuses: { 200: 100, 429: 1 }, policy: '"100-in-1m";q=100;w=60' },
  },
  'From @fastify/rate-limit #1': {
    given: "import Fastify from 'fastify'\nconst app = Fastify()\nconst login = async () => 'ok'",
    probe: `
const statuses = {}
let policy
for (let i = 0; i < 6; i++) {
  const response = await app.inject({ url: '/login' })
  statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1
  policy ??= response.headers['ratelimit-policy']
}
console.log(JSON.stringify({ statuses, policy }))
process.exit(0)
`,
    // A route's inline windows are named after the route.
    expected: { statuses: { 200: 5, 429: 1 }, policy: '"GET /login-60s";q=5;w=60' },
  },
  'From koa-ratelimit #1': {
    given: `import Koa from 'koa'\nconst app = new Koa()\n${REDIS}`,
    probe: `app.use((ctx) => {\n  ctx.body = 'ok'\n})\n${probeServer("app.listen(0, '127.0.0.1')", 101)}`,
    expected: { statuses: { 200: 100, 429: 1 }, policy: '"100-in-1m";q=100;w=60' },
  },
  'From hono-rate-limiter #1': {
    given: "import { Hono } from 'hono'\nimport { serve } from '@hono/node-server'\nconst app = new Hono()",
    // Each request counts for the socket's address: the peer is not the proxy.
    probe: `app.get('/', (c) => c.text('ok'))\n${probeServer("serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })", 101)}`,
    expected: { statuses: { 200: 100, 429: 1 }, policy: '"100-in-15m";q=100;w=900' },
  },
  'From rate-limiter-flexible #1': {
    given: `${REDIS}\nconst req = { ip: '203.0.113.7' }`,
    probe: `
const rest = []
for (let i = 0; i < 5; i++) rest.push((await limiter.consume('login', ipIdentifier(req.ip))).reason)
console.log(JSON.stringify({ allowed: decision.allowed, remaining: decision.windows[0].remaining, rest }))
process.exit(0)
`,
    expected: { allowed: true, remaining: 4, rest: ['ok', 'ok', 'ok', 'ok', 'limited'] },
  },
  'From rate-limiter-flexible #2': {
    given: '',
    // Ten more: the tenth of the second waits for the window to let it in, and is charged.
    probe: `
const more = await Promise.all(Array.from({ length: 10 }, () => limiter.wait('github.api', 'app:42', { maxWaitMs: 60_000 })))
console.log(JSON.stringify({ allowed: more.filter((decision) => decision.allowed).length }))
process.exit(0)
`,
    expected: { allowed: 10 },
  },
  'From @nestjs/throttler #2': {
    given: `import 'reflect-metadata'\n${REDIS}`,
    probe: `
import { NestFactory } from '@nestjs/core'
const nest = await NestFactory.create(AppModule, { logger: false })
await nest.listen(0, '127.0.0.1')
const url = \`\${await nest.getUrl()}/login\`
const statuses: number[] = []
let policy: string | null = null
for (let i = 0; i < 6; i++) {
  const response = await fetch(url, { method: 'POST' })
  statuses.push(response.status)
  policy ??= response.headers.get('ratelimit-policy')
}
// The second of a second's window (1 per second) and the sixth of the minute's (5 per minute) are refused.
console.log(JSON.stringify({ first: statuses[0], second: statuses[1], sixth: statuses[5], policy }))
process.exit(0)
`,
    expected: { first: 201, second: 429, sixth: 429, policy: '"login-1s";q=1;w=1, "login-60s";q=5;w=60' },
  },
  'Rules in one place #1': {
    given: `${EXPRESS}
import { rateLimit } from '@tollgate/express'
import { MemoryStore } from '@tollgate/core'
const store = new MemoryStore()
const login = (req, res) => res.status(401).send('wrong password')`,
    probe: probeServer("app.listen(0, '127.0.0.1')", 4, "{ method: 'POST' }", '/login'),
    files: { 'rules.yaml': 'limits:\n  - name: auth.login\n    config:\n      - { limit: 3, period: 60 }\n' },
    expected: { statuses: { 401: 3, 429: 1 }, policy: '"auth.login-60s";q=3;w=60' },
  },
}

const blocks = guideBlocks(await import('node:fs').then((fs) => fs.readFileSync(GUIDE, 'utf8')))
const runnable = blocks.filter((block) => !block.notChecked)

describe('docs/migrating.md, run as written', () => {
  let dir: string
  let work: string
  const redisUrl = () => `${inject('redisUrl')}/${DATABASE}`
  beforeAll(async () => {
    await mkdir(join(repoRoot, 'test/.tmp'), { recursive: true })
    // Inside test/, so that the snippets' imports resolve to the test package's dependencies.
    dir = await mkdtemp(join(repoRoot, 'test/.tmp/migrating-'))
    work = await mkdtemp(join(dir, 'cwd-'))
    // Nest's decorators, as TypeScript's legacy ones; the packages resolve to what they ship (dist/).
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { experimentalDecorators: true, target: 'es2022', module: 'nodenext' } }),
    )
  })
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true })
    const redis = new Redis(redisUrl())
    await redis.flushdb()
    await redis.quit()
  })

  it('names a run for every block but those marked not-checked', () => {
    expect(runnable.map((block) => block.id).sort()).toEqual(Object.keys(RUNS).sort())
  })

  it.each(runnable.map((block) => [block.id, block] as const))('%s', async (id, block) => {
    const run = RUNS[id]
    if (run === undefined) throw new Error(`no run named for ${id}`)
    for (const [name, text] of Object.entries(run.files ?? {})) await writeFile(join(work, name), text)
    const file = join(dir, `${id.replace(/[^a-z0-9]+/gi, '-')}.${block.language === 'ts' ? 'mts' : 'mjs'}`)
    await writeFile(file, `${run.given}\n\n${adopted(block.code)}\n\n${run.probe}`)
    const { stdout, stderr } = await node(file, work, {
      REDIS_URL: redisUrl(),
      TSX_TSCONFIG_PATH: join(dir, 'tsconfig.json'),
    })
    expect(stderr).not.toMatch(/TG_[A-Z_]+/)
    const last = stdout.trim().split('\n').at(-1) ?? ''
    expect(JSON.parse(last), stderr).toEqual(run.expected)
  })
})

/** Runs `file` with Node (through tsx, which strips its types and compiles its decorators), in `cwd`. */
function node(file: string, cwd: string, env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm')).href
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', tsx, file],
      { cwd, env: { ...process.env, ...env }, timeout: 60_000, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${file} failed: ${error.message}\n${stdout}\n${stderr}`))
        else resolve({ stdout, stderr })
      },
    )
  })
}
