import { createLimiter, loadRules, RedisStore } from '@tollgate/core'
import { type Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cliPrefix, rulesDirectory, runCli } from '../src/cli-runner.js'
import { clusterClient, masterOfSlot, type SpawnedCluster, spawnRedisCluster, waitReady } from '../src/redis-cluster.js'

const RULES = 'limits:\n  - name: api\n    config:\n      - { limit: 100, period: 3600 }\n'

interface Check {
  name: string
  status: 'ok' | 'warn' | 'fail'
  message: string
  details?: Record<string, unknown>
}

describe('tollgate on a Redis Cluster', () => {
  let cluster: SpawnedCluster
  let client: Cluster
  let files: ReturnType<typeof rulesDirectory>
  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3 })
    client = clusterClient(cluster)
    await waitReady(client)
    files = rulesDirectory()
  }, 60_000)
  afterAll(async () => {
    files?.remove()
    await client?.quit()
    await cluster?.stop()
  })

  it('finds the Cluster from one node, checks every slot and master, and inspects keys on any of them', async () => {
    const prefix = cliPrefix('cluster')
    const rules = files.write('rules.yaml', RULES)
    const limiter = createLimiter({ rules: loadRules(rules), store: new RedisStore({ client, prefix }) })
    // Identifiers whose keys hash to different slots, so that the peek goes to more than one master.
    const identifiers = ['ip:1', 'ip:2', 'ip:3', 'user:1', 'user:2']
    for (const identifier of identifiers) await limiter.consume('api', identifier)
    const node = `redis://127.0.0.1:${cluster.startupNodes[0]?.port}`

    const doctor = await runCli(['--redis', node, '--prefix', prefix, '--json', 'doctor'])
    expect(doctor.code, doctor.stdout).toBe(0)
    const checks = new Map((JSON.parse(doctor.stdout).checks as Check[]).map((check) => [check.name, check]))
    expect(checks.get('connection')?.message).toMatch(/\(Cluster\)/)
    expect(checks.get('cluster')).toMatchObject({
      status: 'ok',
      message: 'state ok, 16384 of 16384 slots served, 3 masters',
    })
    expect(checks.get('scripts')?.message).toBe(
      '6 scripts load (decide, sync, lease, reset, publishRules, readRules) on 3 masters',
    )
    expect(checks.get('version')?.details?.versions).toHaveLength(3)

    const inspect = await runCli([
      '--redis',
      node,
      '--prefix',
      prefix,
      '--rules',
      rules,
      '--json',
      'inspect',
      'api',
      ...identifiers,
    ])
    expect(inspect.code, inspect.stderr).toBe(0)
    const windows = JSON.parse(inspect.stdout).windows as Array<{ identifier: string; used: number; ttlMs: number }>
    expect(windows.map((w) => [w.identifier, w.used])).toEqual(identifiers.map((id) => [id, 1]))
    for (const window of windows) expect(window.ttlMs).toBeGreaterThan(0)
    await limiter.close()
  })

  it('fails the cluster check when a master no longer serves a slot', async () => {
    const owner = await masterOfSlot(cluster, 0)
    // The owner forgets the slot; the other masters still think it serves it. The check takes
    // the worst view of any master.
    const node = new Redis(owner.url)
    try {
      await node.cluster('DELSLOTS', 0)
      const run = await runCli(['--redis', owner.url, '--cluster', '--json', 'doctor'])
      expect(run.code).toBe(1)
      const check = (JSON.parse(run.stdout).checks as Check[]).find((c) => c.name === 'cluster')
      expect(check).toMatchObject({
        status: 'fail',
        message:
          'state fail, 16383 of 16384 slots served, 3 masters: 1 slot has no master, and decisions on its keys fail',
      })
    } finally {
      await node.cluster('ADDSLOTS', 0)
      await node.quit()
    }
  })
})
