import { createLimiter, HybridStore, hybridInstancesKey, LiveRules } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { cliPrefix, runCli } from '../src/cli-runner.js'
import { findFreePort } from '../src/free-port.js'
import { keysWithTtl } from '../src/redis-keys.js'

let client: Redis
let url: string
beforeAll(() => {
  url = inject('redisUrl')
  client = new Redis(url)
})
afterAll(async () => {
  await client.quit()
})

interface Check {
  name: string
  status: 'ok' | 'warn' | 'fail'
  message: string
  details?: Record<string, unknown>
}

describe('tollgate doctor', () => {
  it('passes on a healthy Redis, and sees the live rules epoch and the hybrid processes syncing', async () => {
    const prefix = cliPrefix('doctor')
    const rules = { api: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1m' }] } } as const
    const live = new LiveRules({ client, defaults: rules, prefix, pollIntervalMs: 0, nudges: false })
    const store = new HybridStore({ client, prefix, autoSync: false })
    const limiter = createLimiter({ rules, store })
    try {
      await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } })
      await limiter.consume('api', 'ip:1')
      await store.syncNow()
      expect(await client.zcard(hybridInstancesKey(prefix))).toBe(1)

      const run = await runCli(['--redis', url, '--prefix', prefix, '--json', 'doctor'])
      expect(run.code, run.stdout).toBe(0)
      const result = JSON.parse(run.stdout) as { ok: boolean; checks: Check[] }
      expect(result.ok).toBe(true)
      const checks = new Map(result.checks.map((check) => [check.name, check]))
      expect([...checks.keys()]).toEqual([
        'connection',
        'version',
        'scripts',
        'clock',
        'cluster',
        'live rules',
        'hybrid',
      ])
      for (const check of result.checks) expect(check.status, `${check.name}: ${check.message}`).toBe('ok')
      expect(checks.get('scripts')?.message).toBe(
        '6 scripts load (decide, sync, lease, reset, publishRules, readRules)',
      )
      expect(checks.get('live rules')?.details).toEqual({ epoch: 1, stale: false, rejected: [] })
      expect(checks.get('hybrid')?.message).toMatch(/^1 HybridStore process alive \(last synced .+ ago\)$/)
      expect(checks.get('hybrid')?.details?.instances).toEqual([
        {
          id: expect.stringMatching(new RegExp(`^${process.pid}-[0-9a-f]{12}$`)),
          lastSyncAtMs: expect.any(Number),
          ageMs: expect.any(Number),
        },
      ])
      const { skewMs, roundTripMs } = checks.get('clock')!.details as { skewMs: number; roundTripMs: number }
      // One machine, one clock: what it measures is the round trip's asymmetry at most.
      expect(Math.abs(skewMs)).toBeLessThanOrEqual(roundTripMs / 2 + 1)

      const human = await runCli(['--redis', url, '--prefix', prefix, 'doctor'])
      expect(human.code).toBe(0)
      expect(human.stdout).toMatch(/^CHECK +STATUS +DETAIL$/m)
      expect(human.stdout).toMatch(/^live rules +ok +epoch 1 under "cli:doctor:.*", last published \S+$/m)
      expect(human.stdout.trimEnd().split('\n').at(-1)).toBe('all good')
    } finally {
      await limiter.close()
      await live.close()
      const keys = (await keysWithTtl(client, `${prefix}{rules}:`)).map((entry) => entry.key)
      if (keys.length > 0) await client.del(...keys)
    }
  })

  it('fails at once, exit 1, naming the server and the refusal, against a closed port', async () => {
    const port = await findFreePort()
    const run = await runCli(['--redis', `redis://127.0.0.1:${port}`, 'doctor'])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(
      new RegExp(
        `^connection +fail +cannot reach Redis at redis://127\\.0\\.0\\.1:${port}: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}$`,
        'm',
      ),
    )
    expect(run.stdout.trimEnd().split('\n').at(-1)).toBe('1 failed')
    // Refused, not waited out: the connect timeout is 5 s, and ioredis would otherwise retry for ever.
    expect(run.durationMs).toBeLessThan(4_000)
  })
})
