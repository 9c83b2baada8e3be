import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createLimiter, MemoryStore, type RulesOptions, shareFleetStats } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { CLI_BIN, cliPrefix, runCli } from '../src/cli-runner.js'
import { ManualClock } from '../src/manual-clock.js'

// Two app processes share their stats; the CLI reads the fleet's from Redis.
const rules = {
  login: {
    algorithm: 'fixed-window',
    windows: [
      { limit: 20, period: '1m' },
      { limit: 5, period: '3s' },
    ],
  },
} satisfies RulesOptions

let client: Redis
let url: string
beforeAll(() => {
  url = inject('redisUrl')
  client = new Redis(url)
})
afterAll(async () => {
  await client.quit()
})

/** Two processes' limiters on their own clock, sharing their stats under `prefix`, and the refusals they made. */
async function fleet(prefix: string, clock: ManualClock) {
  const limiters = [0, 1].map(() =>
    createLimiter({ rules, store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), onWarning: () => {} }),
  )
  const stats = limiters.map((limiter) =>
    shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000, clock: clock.now }),
  )
  let refused = 0
  let allowed = 0
  for (let i = 0; i < 200; i++) {
    const decision = await (limiters[i % 2] as (typeof limiters)[number]).consume('login', 'ip:203.0.113.7')
    if (decision.allowed) allowed++
    else refused++
  }
  for (let i = 0; i < 40; i++) {
    if ((await (limiters[i % 2] as (typeof limiters)[number]).consume('login', `ip:198.51.100.${i}`)).allowed) allowed++
  }
  // The lists of refused identifiers are written at the first flush 10 s after the last.
  clock.advance(10_000)
  await Promise.all(stats.map((s) => s.flush()))
  return {
    allowed,
    refused,
    close: async () => {
      await Promise.all(stats.map((s) => s.close()))
      await Promise.all(limiters.map((limiter) => limiter.close()))
    },
  }
}

describe('tollgate top and watch', () => {
  it('top names the most refused identifier of the fleet; watch shows the second its decisions were made in', async () => {
    const prefix = cliPrefix('fleet')
    // Twenty seconds ago, so that the lists' 10 s slot is within top's last five minutes.
    const clock = new ManualClock(Date.now() - 20_000)
    const second = Math.floor(clock.now() / 1000)
    const { allowed, refused, close } = await fleet(prefix, clock)
    const cli = ['--redis', url, '--prefix', prefix]

    const top = await runCli([...cli, '--json', 'top', '--limit', '3'])
    expect(top.code, top.stderr).toBe(0)
    const result = JSON.parse(top.stdout)
    expect(result.refused[0]).toEqual({ rule: 'login', identifier: 'ip:203.0.113.7', refusals: refused })
    expect(refused).toBe(200 - 5 - 5)
    const text = await runCli([...cli, 'top', '--rule', 'login'])
    expect(text.stdout).toMatch(/^rule\s+identifier\s+refusals\nlogin\s+ip:203\.0\.113\.7\s+190\n/)

    const watch = await runCli([...cli, '--json', 'watch', '--at', String(second)])
    expect(watch.code, watch.stderr).toBe(0)
    expect(JSON.parse(watch.stdout)).toEqual({
      second,
      rows: [{ rule: 'login', decisions: 240, allowed, refused, denials: { '3s': refused } }],
      storeErrors: 0,
    })
    const frame = await runCli([...cli, 'watch', '--at', String(second)])
    expect(frame.stdout.split('\n').slice(1, 3)).toEqual([
      'rule   decisions/s  allowed  refused  refusals by window',
      `login          240       ${allowed}      ${refused}  3s ${refused}`,
    ])
    await close()
  })

  // Regression: in a fleet's first 10 s, before any process had written its list of refused
  // identifiers, top asked whether the processes call shareFleetStats while they did.
  it('waits for the first report while the processes count refusals, and asks about shareFleetStats only when nothing came', async () => {
    const prefix = cliPrefix('first-report')
    // Ten seconds ago, so that the list written once the clock has moved 10 s is not ahead of top's.
    const clock = new ManualClock(Date.now() - 10_000)
    const limiter = createLimiter({ rules, store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }) })
    const stats = shareFleetStats(limiter, { client, prefix, flushIntervalMs: 60_000, clock: clock.now })
    for (let i = 0; i < 8; i++) await limiter.consume('login', 'ip:203.0.113.7')
    // The counts of the second are written; the list of who was refused is due 10 s after the start.
    await stats.flush()
    const waiting = await runCli(['--redis', url, '--prefix', prefix, 'top'])
    expect(waiting.code, waiting.stderr).toBe(0)
    expect(waiting.stdout).toBe(
      'waiting for the first report of refused identifiers: the fleet counted 3 refusals in the last 5m, and each process reports who it refused every 10s (shareFleetStats topIntervalMs); run it again in 10s\n',
    )
    const json = await runCli(['--redis', url, '--prefix', prefix, '--json', 'top'])
    expect(JSON.parse(json.stdout)).toEqual({ sinceMs: 300_000, refused: [] })

    // Once the interval has passed, the list is there.
    clock.advance(10_000)
    await stats.flush()
    const listed = await runCli(['--redis', url, '--prefix', prefix, 'top'])
    expect(listed.stdout).toMatch(/^rule\s+identifier\s+refusals\nlogin\s+ip:203\.0\.113\.7\s+3\n/)
    await stats.close()
    await limiter.close()

    const quiet = cliPrefix('no-refusals')
    const calm = createLimiter({ rules, store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }) })
    const calmStats = shareFleetStats(calm, { client, prefix: quiet, flushIntervalMs: 60_000, clock: clock.now })
    for (let i = 0; i < 4; i++) await calm.consume('login', `ip:198.51.100.${i}`)
    await calmStats.close()
    await calm.close()
    const none = await runCli(['--redis', url, '--prefix', quiet, 'top'])
    expect(none.stdout).toBe(
      'no refusals recorded in the last 5m: the processes sharing their stats made 4 decisions in the last 5m, none refused\n',
    )

    const nothing = cliPrefix('empty')
    const empty = await runCli(['--redis', url, '--prefix', nothing, 'top', '--since', '10s'])
    expect(empty.code).toBe(0)
    expect(empty.stdout).toBe(
      `no refusals recorded in the last 10s, and no process reported anything under prefix "${nothing}" in the last 12s: do the processes call shareFleetStats(limiter, { client, prefix: "${nothing}" })?\n`,
    )
  })

  // Regression: `top --since 5` said "5 is not a duration: use milliseconds as a number".
  it('takes a bare number of milliseconds for a duration, as everywhere in Tollgate, and refuses bad options as usage errors', async () => {
    const cli = ['--redis', url, '--prefix', cliPrefix('since')]
    const bare = await runCli([...cli, '--json', 'top', '--since', '300000'])
    expect(bare.code, bare.stderr).toBe(0)
    expect(JSON.parse(bare.stdout)).toEqual({ sinceMs: 300_000, refused: [] })
    expect(bare.stderr).toBe('')
    const short = await runCli([...cli, '--json', 'top', '--since', '5'])
    expect(short.code, short.stderr).toBe(0)
    expect(JSON.parse(short.stdout).sinceMs).toBe(5)
    expect(short.stderr).toBe(
      '--since 5 is 5 ms (a bare number is milliseconds); write 5s or 5m for seconds or minutes\n',
    )

    const since = await runCli([...cli, 'top', '--since', 'soon'])
    expect(since.code).toBe(2)
    expect(since.stderr).toContain(
      '--since: "soon" is not a duration: use a number and a unit, such as 5m, 90s, 1h or 500ms (units: ms, s, m, h, d, or their names), or a bare number of milliseconds',
    )
    const zero = await runCli([...cli, 'top', '--since', '0'])
    expect(zero.code).toBe(2)
    expect(zero.stderr).toContain('--since: 0 must be a positive duration')
    const count = await runCli([...cli, 'watch', '--count', '0'])
    expect(count.code).toBe(2)
    expect(count.stderr).toContain('--count must be a positive integer, got 0')
  })

  it('admin serves the web view on 127.0.0.1 until it is stopped, read-only without a token', async () => {
    const { REDIS_URL: _url, ...env } = process.env
    const child = spawn(
      process.execPath,
      [CLI_BIN, '--redis', url, '--prefix', cliPrefix('admin'), '--json', 'admin', '--port', '0'],
      {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let stdout = ''
    child.stdout.setEncoding('utf8')
    // The one JSON document it prints once it listens.
    const listening = new Promise<{ url: string; readOnly: boolean }>((resolve) => {
      child.stdout.on('data', (chunk: string) => {
        stdout += chunk
        try {
          resolve(JSON.parse(stdout))
        } catch {
          // not whole yet
        }
      })
    })
    const { url: page, readOnly } = await listening
    expect(page).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
    expect(readOnly).toBe(true)
    const response = await fetch(page)
    expect(response.status).toBe(200)
    expect(await response.text()).toContain('<html')
    const reset = await fetch(`${page}reset`, {
      method: 'POST',
      body: JSON.stringify({ rule: 'login', identifier: 'ip:1' }),
    })
    expect(reset.status).toBe(403)
    child.kill('SIGTERM')
    const [code] = await once(child, 'exit')
    expect(code).toBe(0)
  })
})
