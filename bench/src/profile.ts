// pnpm --filter @tollgate/bench profile [contender] [one-window|two-by-two] [seconds]
// Profiles one contender (default: Tollgate's RedisStore with sliding-log) at 256 in flight with
// `node --cpu-prof` against a redis-server of its own, and prints the top self-time functions
// and areas of the measured seconds. Contenders are named as in contenders/index.ts, e.g.
// tollgate/redis/fixed-window, express-rate-limit/redis, ceiling/raw-evalsha.
import { execFile } from 'node:child_process'
import { mkdir, readdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'
import { nodeFlags } from './child-process.js'
import { tollgateBuild } from './machine.js'
import { summarizeProfile } from './profile-summary.js'
import { commandStats } from './redis-info.js'

const run = promisify(execFile)
const [id = 'tollgate/redis/sliding-log', shape = 'one-window', seconds = '5'] = process.argv.slice(2)
const here = dirname(fileURLToPath(import.meta.url))
const dir = join(here, '..', 'results', 'raw', 'profiles', `${id.replaceAll('/', '-')}-${shape}-${Date.now()}`)
await mkdir(dir, { recursive: true })

const server = await spawnRedisServer()
const admin = new Redis(server.url)
try {
  await admin.config('RESETSTAT')
  const { stdout } = await run(
    process.execPath,
    [
      '--cpu-prof',
      '--cpu-prof-dir',
      dir,
      ...nodeFlags(),
      join(here, 'profile-load.ts'),
      server.url,
      id,
      shape,
      seconds,
    ],
    { cwd: join(here, '..') },
  )
  const stats = await commandStats(admin)
  const evalsha = stats.get('evalsha')
  const file = join(dir, (await readdir(dir)).find((name) => name.endsWith('.cpuprofile')) as string)
  const measured = JSON.parse(stdout) as {
    perSecond: number
    cpuUsPerDecision: number
    errors: number
    fromUs: number
    toUs: number
  }
  const { functions, areas } = await summarizeProfile(file, measured)
  const percent = (share: number) => `${(share * 100).toFixed(1).padStart(5)}%`
  process.stdout.write(
    `${id}, ${shape}, 256 in flight, 10,000 identifiers, Tollgate ${tollgateBuild()}: ${Math.round(measured.perSecond)} decisions/s, ${measured.cpuUsPerDecision.toFixed(2)} µs of client CPU per decision, ${measured.errors} errors\n`,
  )
  if (evalsha) {
    process.stdout.write(
      `Redis: ${(evalsha.usec / evalsha.calls).toFixed(1)} µs per EVALSHA (INFO commandstats, script included)\n`,
    )
  }
  process.stdout.write(
    `\nClient self time by area, measured seconds only (idle excluded):\n${areas.map((a) => `${percent(a.share)}  ${a.name}`).join('\n')}\n`,
  )
  process.stdout.write(
    `\nTop functions by self time:\n${functions.map((f) => `${percent(f.share)}  ${f.name}`).join('\n')}\n`,
  )
  process.stdout.write(`\nProfile: ${file} (open in Chrome DevTools or speedscope)\n`)
} finally {
  admin.disconnect()
  await server.stop()
}
