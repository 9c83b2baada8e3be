import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPacked, packPackage, runCommand } from '../src/pack-package.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

interface AdapterApp {
  /** Imports, as ESM and as CJS; both scripts then run the same body. */
  esm: string
  cjs: string
  /** Starts an app limiting GET / to 2 per minute and resolves to a function that returns one request's status. */
  body: string
  /** A consumer that must type-check, as .mts and as .cts. */
  checkMts: string
  checkCts: string
  /** A CommonJS app as written without top-level await, when the adapter has a register step to await. */
  cjsUnawaited?: string
}

// Three requests, printed as JSON: the third must be refused by the packed adapter and core.
const REQUESTS = `
const request = await start()
const statuses = []
for (let i = 0; i < 3; i++) statuses.push(await request())
await stop()
process.stdout.write(JSON.stringify(statuses))
`

const overHttp = (listen: string) => `
let server
async function start() {
  const app = ${listen}
  server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const { port } = server.address()
  return async () => (await fetch('http://127.0.0.1:' + port + '/')).status
}
const stop = () => new Promise((resolve) => server.close(resolve))
`

const ADAPTERS: Record<'express' | 'fastify' | 'koa' | 'hono' | 'nestjs', AdapterApp> = {
  express: {
    esm: `import express from 'express'\nimport { rateLimit } from '@tollgate/express'`,
    cjs: `const express = require('express')\nconst { rateLimit } = require('@tollgate/express')`,
    body: overHttp(
      `express().get('/', rateLimit({ windows: [{ limit: 2, period: '1m' }] }), (req, res) => { res.send('ok') })`,
    ),
    checkMts: `import express from 'express'
import { type RateLimitMiddleware, rateLimit } from '@tollgate/express'
const limit: RateLimitMiddleware = rateLimit({ windows: [{ limit: 2, period: '1m' }] })
express().use(limit)
// @ts-expect-error limit is a number: fails if the declarations resolve to any
rateLimit({ windows: [{ limit: '2', period: '1m' }] })
`,
    checkCts: `import express = require('express')
import tollgate = require('@tollgate/express')
const limit: tollgate.RateLimitMiddleware = tollgate.rateLimit({ windows: [{ limit: 2, period: '1m' }] })
express().use(limit)
// @ts-expect-error limit is a number: fails if the declarations resolve to any
tollgate.rateLimit({ windows: [{ limit: '2', period: '1m' }] })
`,
  },
  fastify: {
    esm: `import Fastify from 'fastify'\nimport tollgate from '@tollgate/fastify'`,
    cjs: `const Fastify = require('fastify')\nconst { tollgate } = require('@tollgate/fastify')`,
    body: `
const app = Fastify()
async function start() {
  await app.register(tollgate, { windows: [{ limit: 2, period: '1m' }] })
  app.get('/', async () => 'ok')
  await app.ready()
  return async () => (await app.inject({ method: 'GET', url: '/' })).statusCode
}
const stop = () => app.close()
`,
    checkMts: `import { type Decision, tollgate } from '@tollgate/fastify'
import { fastify } from 'fastify'
const app = fastify()
await app.register(tollgate, { windows: [{ limit: 2, period: '1s' }] })
app.get('/', { config: { rateLimit: { rule: 'api', cost: 2 } } }, async (request) => {
  const decision: Decision | undefined = request.rateLimit
  return { allowed: decision?.allowed ?? null, rule: app.tollgate.engine?.rule }
})
// @ts-expect-error only onRequest and preHandler check: fails if the route config resolves to any
app.get('/bad', { config: { rateLimit: { hook: 'onSend' } } }, async () => null)
`,
    // Regression: routes declared after a register CommonJS code cannot await went unlimited.
    cjsUnawaited: `const Fastify = require('fastify')
const app = Fastify()
app.register(require('@tollgate/fastify'), { windows: [{ limit: 2, period: '1m' }] })
app.get('/', async () => 'ok')
app.ready().then(async () => {
  const answers = []
  for (let i = 0; i < 3; i++) {
    const response = await app.inject({ method: 'GET', url: '/' })
    answers.push([response.statusCode, response.headers.ratelimit ?? null])
  }
  await app.close()
  process.stdout.write(JSON.stringify(answers))
})
`,
    checkCts: `import { tollgate } from '@tollgate/fastify'
import { fastify } from 'fastify'
export async function build() {
  const app = fastify()
  await app.register(tollgate, { global: false })
  app.get('/health', { config: { rateLimit: false } }, async (request) => request.rateLimit?.reason ?? null)
  // @ts-expect-error cost is a number or a function: fails if the route config augmentation is lost
  app.get('/x', { config: { rateLimit: { cost: 'two' } } }, async () => 'ok')
  return app
}
`,
  },
  koa: {
    esm: `import Koa from 'koa'\nimport { rateLimit } from '@tollgate/koa'`,
    cjs: `const Koa = require('koa')\nconst { rateLimit } = require('@tollgate/koa')`,
    body: overHttp(
      `new Koa().use(rateLimit({ windows: [{ limit: 2, period: '1m' }] })).use((ctx) => { ctx.body = 'ok' })`,
    ),
    checkMts: `import Koa from 'koa'
import { type RateLimitMiddleware, rateLimit } from '@tollgate/koa'
const limit: RateLimitMiddleware = rateLimit({ windows: [{ limit: 2, period: '1m' }] })
new Koa().use(limit)
// @ts-expect-error limit is a number: fails if the declarations resolve to any
rateLimit({ windows: [{ limit: '2', period: '1m' }] })
`,
    checkCts: `import Koa = require('koa')
import tollgate = require('@tollgate/koa')
const limit: tollgate.RateLimitMiddleware = tollgate.rateLimit({ windows: [{ limit: 2, period: '1m' }] })
new Koa().use(limit)
// @ts-expect-error limit is a number: fails if the declarations resolve to any
tollgate.rateLimit({ windows: [{ limit: '2', period: '1m' }] })
`,
  },
  hono: {
    esm: `import { Hono } from 'hono'\nimport { rateLimit } from '@tollgate/hono'`,
    cjs: `const { Hono } = require('hono')\nconst { rateLimit } = require('@tollgate/hono')`,
    // Hono's own in-process requests, with no server: the address comes from getConnInfo, as on
    // a runtime other than Node.
    body: `
const app = new Hono()
app.use(rateLimit({ windows: [{ limit: 2, period: '1m' }], getConnInfo: () => ({ remote: { address: '203.0.113.7' } }) }))
app.get('/', (c) => c.text('ok'))
async function start() {
  return async () => (await app.request('/')).status
}
const stop = async () => {}
`,
    checkMts: `import { Hono } from 'hono'
import { type RateLimitMiddleware, rateLimit } from '@tollgate/hono'
const limit: RateLimitMiddleware = rateLimit({ windows: [{ limit: 2, period: '1m' }] })
const app = new Hono()
app.use(limit)
app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.windows[0]?.remaining ?? null }))
// @ts-expect-error limit is a number: fails if the declarations resolve to any
rateLimit({ windows: [{ limit: '2', period: '1m' }] })
`,
    checkCts: `import hono = require('hono')
import tollgate = require('@tollgate/hono')
const limit: tollgate.RateLimitMiddleware = tollgate.rateLimit({ windows: [{ limit: 2, period: '1m' }] })
const app = new hono.Hono()
app.use(limit)
app.get('/', (c) => c.json({ reason: c.get('rateLimit')?.reason ?? null }))
// @ts-expect-error limit is a number: fails if the declarations resolve to any
tollgate.rateLimit({ windows: [{ limit: '2', period: '1m' }] })
`,
  },
  nestjs: {
    esm: `import { Controller, Get, Module } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { TollgateGuard, TollgateModule } from '@tollgate/nestjs'`,
    cjs: `const { Controller, Get, Module } = require('@nestjs/common')
const { APP_GUARD, NestFactory } = require('@nestjs/core')
const { TollgateGuard, TollgateModule } = require('@tollgate/nestjs')`,
    // Decorators applied as TypeScript applies them: the scripts are JavaScript.
    body: `
class Items {
  list() { return 'ok' }
}
Get()(Items.prototype, 'list', Object.getOwnPropertyDescriptor(Items.prototype, 'list'))
Controller()(Items)
class App {}
Module({
  imports: [TollgateModule.forRoot({ windows: [{ limit: 2, period: '1m' }] })],
  controllers: [Items],
  providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
})(App)
let app
async function start() {
  app = await NestFactory.create(App, { logger: false })
  await app.listen(0, '127.0.0.1')
  const { port } = app.getHttpServer().address()
  return async () => (await fetch('http://127.0.0.1:' + port + '/')).status
}
const stop = () => app.close()
`,
    // Decorators called as functions: the check compiles without experimentalDecorators.
    checkMts: `import { APP_GUARD } from '@nestjs/core'
import { type Decision, RateLimit, SkipRateLimit, TollgateGuard, TollgateModule } from '@tollgate/nestjs'
export const imports = [TollgateModule.forRoot({ windows: [{ limit: 2, period: '1m' }] })]
export const providers = [{ provide: APP_GUARD, useClass: TollgateGuard }]
export const perPlan: MethodDecorator = RateLimit((req: { headers: { 'x-plan'?: string | string[] } }) =>
  req.headers['x-plan'] === 'pro' ? 'api.pro' : 'api.free',
)
export const open: ClassDecorator = SkipRateLimit()
export const left = (decision: Decision | undefined) => decision?.windows[0]?.remaining
// @ts-expect-error limit is a number: fails if the declarations resolve to any
TollgateModule.forRoot({ windows: [{ limit: '2', period: '1m' }] })
`,
    checkCts: `import core = require('@nestjs/core')
import tollgate = require('@tollgate/nestjs')
export const module = tollgate.TollgateModule.forRootAsync({
  inject: ['LIMITER'],
  useFactory: (limiter: import('@tollgate/core').Limiter) => ({ limiter, rule: 'api' }),
})
export const providers = [{ provide: core.APP_GUARD, useClass: tollgate.TollgateGuard }]
export const upload: MethodDecorator = tollgate.RateLimit({ rule: 'upload', cost: 2 })
// @ts-expect-error cost is a number or a function: fails if the declarations resolve to any
tollgate.RateLimit({ rule: 'upload', cost: 'two' })
`,
  },
}

describe.each(Object.entries(ADAPTERS))('@tollgate/%s as installed from the registry', (name, adapter) => {
  const adapterDir = join(repoRoot, 'packages', name)
  const coreDir = join(repoRoot, 'packages/core')
  let tmp: string
  let app: string

  beforeAll(async () => {
    for (const dir of [coreDir, adapterDir]) {
      if (!existsSync(join(dir, 'dist/index.js'))) {
        throw new Error(`${dir}/dist/index.js is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
      }
    }
    tmp = await realpath(await mkdtemp(join(tmpdir(), `tollgate-packed-${name}-`)))
    app = join(tmp, 'app')
    // Core first: the adapter's dependency on it is then the packed core, not the workspace's.
    for (const dir of [coreDir, adapterDir]) {
      const packDir = await mkdtemp(join(tmp, 'pack-'))
      await installPacked(await packPackage(dir, packDir), dir, app)
    }
    await mkdir(join(app, 'node_modules/@types'), { recursive: true })
    await symlink(join(repoRoot, 'node_modules/@types/node'), join(app, 'node_modules/@types/node'), 'dir')
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
    await writeFile(join(app, 'app.mjs'), `${adapter.esm}\n${adapter.body}\n${REQUESTS}`)
    await writeFile(join(app, 'app.cjs'), `${adapter.cjs}\n${adapter.body}\n;(async () => {\n${REQUESTS}\n})()`)
    if (adapter.cjsUnawaited) await writeFile(join(app, 'unawaited.cjs'), adapter.cjsUnawaited)
    await writeFile(join(app, 'check.mts'), adapter.checkMts)
    await writeFile(join(app, 'check.cts'), adapter.checkCts)
  })

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  it('depends on @tollgate/core by a range npm can install, with exports that point at dist', async () => {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules/@tollgate', name, 'package.json'), 'utf8'))
    expect(manifest.dependencies['@tollgate/core']).toMatch(/^\^\d+\.\d+\.\d+$/)
    expect(manifest.exports['.']).toEqual({
      import: { types: './dist/index.d.ts', default: './dist/index.js' },
      require: { types: './dist/index.d.cts', default: './dist/index.cjs' },
    })
  })

  it('limits requests the same from ESM and from CJS', async () => {
    const [esm, cjs] = await Promise.all([runApp(app, 'app.mjs'), runApp(app, 'app.cjs')])
    expect(esm).toEqual([200, 200, 429])
    expect(cjs).toEqual(esm)
  })

  if (adapter.cjsUnawaited) {
    it('limits the routes a CommonJS app declares after a register it does not await', async () => {
      const { stdout } = await runCommand(process.execPath, ['unawaited.cjs'], { cwd: app, timeoutMs: 30_000 })
      const answers = JSON.parse(stdout) as Array<[number, string | null]>
      expect(answers.map(([status]) => status)).toEqual([200, 200, 429])
      expect(answers.map(([, header]) => header)).toEqual([
        expect.stringMatching(/^"2-in-1m";r=1;t=\d+$/),
        expect.stringMatching(/^"2-in-1m";r=0;t=\d+$/),
        expect.stringMatching(/^"2-in-1m";r=0;t=\d+$/),
      ])
    })
  }

  // One program holding both the ESM and the CJS declarations, as an ESM app with one CommonJS
  // file has. Regression: @tollgate/fastify's index.d.ts and index.d.cts each declared the Fastify
  // augmentation with types of their own: "Subsequent property declarations must have the same type".
  it('typechecks one consumer program that imports it from ESM and from CJS, under nodenext', async () => {
    const tsc = createRequire(join(repoRoot, 'package.json')).resolve('typescript/bin/tsc')
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext']
    const checks = ['--skipLibCheck', 'false', '--lib', 'es2022', '--types', 'node', 'check.mts', 'check.cts']
    const { stdout } = await runCommand(process.execPath, [tsc, ...flags, ...checks], { cwd: app, timeoutMs: 60_000 })
    expect(stdout).toBe('')
  })
})

async function runApp(app: string, script: string): Promise<number[]> {
  const { stdout } = await runCommand(process.execPath, [script], { cwd: app, timeoutMs: 30_000 })
  return JSON.parse(stdout) as number[]
}
