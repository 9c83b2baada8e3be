// pnpm --filter @tollgate/bench lua-probe [--script <file>]… [--batch 128] [--ms 400] [--repetitions 5]
//   [--algorithms sl,fw,sw,tb] [--shapes one-window,two-by-two] [--keys spread,hot] [--shed]
//
// The decide script alone, without the client: EVALSHA of `--batch` consumes at a time (two calls
// in flight) against a redis-server of its own, and the time Redis spent per decision (INFO
// commandstats, the script and its commands). Each `--script` is a generated.ts or a plain .lua
// file; by default the workspace's packages/core/src/scripts/generated.ts. Several scripts are
// measured in turns, the order rotated each repetition, Redis flushed before each measurement,
// so that a copy of the script edited one way can be compared with the shipped one on a busy
// machine. Prints medians with the min–max range. `--shed` gives every window a lowBurst of half its
// limit and every decision a random number of its own, as the store sends a rule that sheds.
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'
import { commandStats } from './redis-info.js'

const here = dirname(fileURLToPath(import.meta.url))
const { values } = parseArgs({
  options: {
    script: { type: 'string', multiple: true },
    batch: { type: 'string', default: '128' },
    ms: { type: 'string', default: '400' },
    repetitions: { type: 'string', default: '5' },
    algorithms: { type: 'string', default: 'sl,fw,sw,tb' },
    shapes: { type: 'string', default: 'one-window,two-by-two' },
    keys: { type: 'string', default: 'spread,hot' },
    shed: { type: 'boolean', default: false },
  },
})

const LIMIT = 1_000_000_000
const PERIOD_MS = 60_000
const IDENTIFIERS = 10_000
const batch = Number(values.batch)
const measureMs = Number(values.ms)
const repetitions = Number(values.repetitions)

/** The script's text: the `lua` string of a generated.ts, or a .lua file as it is. */
function scriptOf(file: string): string {
  const text = readFileSync(file, 'utf8')
  if (!file.endsWith('.ts')) return text
  const match = /lua: ("(?:[^"\\]|\\.)*")/.exec(text)
  if (!match) throw new Error(`--script ${file}: no lua string found`)
  return JSON.parse(match[1] as string) as string
}

// pnpm runs the script in bench/; INIT_CWD is where the command was typed.
const cwd = process.env.INIT_CWD ?? process.cwd()
const files = values.script?.map((file) => resolve(cwd, file)) ?? [
  join(here, '..', '..', 'packages', 'core', 'src', 'scripts', 'generated.ts'),
]

/** The two-by-two rule of the decisions measure: the first window, then a tenth of it per second. */
function specOf(code: string, shape: string): string {
  const low = (limit: number) => (values.shed ? `/${limit / 2}` : '')
  return shape === 'one-window'
    ? `${code} ${LIMIT} ${PERIOD_MS}${low(LIMIT)}`
    : `${code} ${LIMIT} ${PERIOD_MS}${low(LIMIT)} ${LIMIT / 10} 1000${low(LIMIT / 10)}`
}

function keysOf(code: string, shape: string, i: number): string[] {
  const ip = `tg:r:{ip:10.0.${(i >> 8) & 255}.${i & 255}}:${code}`
  return shape === 'one-window' ? [ip] : [ip, `tg:r:{user:${i}}:${code}`]
}

const server = await spawnRedisServer()
const client = new Redis(server.url)
const admin = new Redis(server.url)

async function measure(sha: string, code: string, shape: string, spread: boolean): Promise<number> {
  const spec = specOf(code, shape)
  const rules = `${spec}${shape === 'one-window' ? '' : `|${spec}`}`
  const request = values.shed ? `consume 1 - * ${rules}` : `consume 1 - ${rules}`
  let next = 0
  const call = () => {
    const keys: string[] = []
    const args: string[] = []
    for (let d = 0; d < batch; d++) {
      keys.push(...keysOf(code, shape, spread ? next++ % IDENTIFIERS : 0))
      args.push(request)
      // A decision that may shed sends its random number after its request, one of its own each.
      if (values.shed) args.push(String(Math.random()))
    }
    return client.evalsha(sha, keys.length, ...keys, ...args)
  }
  await admin.flushall()
  await admin.config('RESETSTAT')
  let decisions = 0
  const until = performance.now() + measureMs
  const loop = async () => {
    while (performance.now() < until) {
      await call()
      decisions += batch
    }
  }
  await Promise.all([loop(), loop()])
  const stat = (await commandStats(admin)).get('evalsha')
  return (stat?.usec ?? Number.NaN) / decisions
}

try {
  const scripts = files.map((file) => ({ file, lua: scriptOf(file), sha: '' }))
  for (const script of scripts) script.sha = (await admin.script('LOAD', script.lua)) as string
  process.stdout.write(
    `Redis µs per decision, batches of ${batch}, ${repetitions} × ${measureMs} ms; load average ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}\n`,
  )
  process.stdout.write(
    `| algorithm | shape | keys | ${scripts.map((s) => s.file.split('/').slice(-2).join('/')).join(' | ')} |\n`,
  )
  process.stdout.write(`| --- | --- | --- | ${scripts.map(() => '---:').join(' | ')} |\n`)
  for (const code of values.algorithms.split(',')) {
    for (const shape of values.shapes.split(',')) {
      for (const keys of values.keys.split(',')) {
        const spread = keys === 'spread'
        // A warm-up per script, then the scripts in turns, the order rotated each repetition.
        for (const script of scripts) await measure(script.sha, code, shape, spread)
        const samples = scripts.map(() => [] as number[])
        for (let r = 0; r < repetitions; r++) {
          for (let s = 0; s < scripts.length; s++) {
            const index = (s + r) % scripts.length
            samples[index]?.push(await measure((scripts[index] as (typeof scripts)[number]).sha, code, shape, spread))
          }
        }
        const cells = samples.map((values) => {
          const sorted = [...values].sort((a, b) => a - b)
          const median = sorted[Math.floor(sorted.length / 2)] as number
          return `${median.toFixed(2)} (${(sorted[0] as number).toFixed(2)}–${(sorted[sorted.length - 1] as number).toFixed(2)})`
        })
        process.stdout.write(`| ${code} | ${shape} | ${keys} | ${cells.join(' | ')} |\n`)
      }
    }
  }
  process.stdout.write(
    `load average at the end ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}\n`,
  )
} finally {
  client.disconnect()
  admin.disconnect()
  await server.stop()
}
