// One framework with one variant, listening on 127.0.0.1. Prints {"port"} once ready, then
// answers each stdin line "cpu" with its CPU seconds so far; exits when stdin closes.
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { type Framework, usesRedis, type Variant } from './variants.js'

const [framework, variant, redisUrl] = process.argv.slice(2) as [Framework, Variant, string]
const client = usesRedis(variant) ? new Redis(redisUrl) : undefined
await client?.ping()
// Only this framework's module is loaded, so that a server starts fast and holds nothing else.
const start = {
  express: async () => (await import('./express-app.js')).startExpress,
  fastify: async () => (await import('./fastify-app.js')).startFastify,
  koa: async () => (await import('./koa-app.js')).startKoa,
}[framework]
const port = await (await start())(variant, client)
process.stdout.write(`${JSON.stringify({ port })}\n`)

for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'cpu') {
    const { user, system } = process.cpuUsage()
    process.stdout.write(`${JSON.stringify({ cpuSeconds: (user + system) / 1e6 })}\n`)
  }
}
process.exit(0)
