import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliRun, runCli } from '../src/cli-runner.js'
import { findFreePort } from '../src/free-port.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

const SECRET = 'hunter2secret'

function expectNoSecret(run: CliRun): void {
  expect(run.stdout).not.toContain(SECRET)
  expect(run.stderr).not.toContain(SECRET)
  // Nor a piece of it, as a URL parser that split it at a reserved character would leave.
  expect(`${run.stdout}${run.stderr}`).not.toMatch(/hunter|secret/)
}

describe.concurrent('a --redis URL that does not parse, or says something the CLI cannot use', () => {
  it.each([
    [
      'a port out of range',
      `redis://:${SECRET}@127.0.0.1:99999`,
      /the port must be a number from 1 to 65535, got 99999/,
    ],
    ['port 0', `redis://:${SECRET}@127.0.0.1:0`, /the port must be a number from 1 to 65535, got 0/],
    ['a port that is not a number', `redis://:${SECRET}@127.0.0.1:63x9`, /the port must be a number/],
    [
      'a password without its @',
      `redis://:${SECRET}`,
      /the port must be a number from 1 to 65535, in "redis:\/\/:\*\*\*"/,
    ],
    ['a host that is not one', `redis://:${SECRET}@[bad/`, /the host "\[bad" is neither a host name nor an IP address/],
    ['IPv6 without brackets', `redis://:${SECRET}@::1:6379`, /IPv6 goes in brackets/],
    [
      'a malformed percent-encoding',
      `redis://:hunter%zz${SECRET}@127.0.0.1:6379`,
      /the password has a '%' that does not start an escape/,
    ],
    [
      'an escape that is not UTF-8',
      `redis://:%ff${SECRET}@127.0.0.1:6379`,
      /the password decodes to bytes that are not UTF-8/,
    ],
    ['a bad escape in the user name', `redis://al%2ice:${SECRET}@127.0.0.1:6379`, /the user name has a '%'/],
    [
      'a database that is not a number',
      `redis://:${SECRET}@127.0.0.1:6379/x`,
      /the database in the URL's path must be a whole number, got "\/x"/,
    ],
    [
      'a query, which is not read',
      `redis://127.0.0.1:6379/0?password=${SECRET}`,
      /a query or fragment \(\?…\) is not read/,
    ],
    [
      'another scheme',
      `http://:${SECRET}@127.0.0.1:6379`,
      /must be a redis:\/\/ or rediss:\/\/ URL, got "http:\/\/:\*\*\*@127\.0\.0\.1:6379"/,
    ],
    [
      'no scheme',
      `${SECRET}@127.0.0.1:6379`,
      /must be a redis:\/\/ or rediss:\/\/ URL, got "\*\*\*@127\.0\.0\.1:6379"/,
    ],
  ])('exits 2 for %s, saying why, and never prints the password', async (_what, url, reason) => {
    const [human, json] = await Promise.all([
      runCli(['--redis', url, 'doctor']),
      runCli(['--redis', url, '--json', 'doctor']),
    ])
    expect(human.code, human.stderr).toBe(2)
    expect(human.stderr).toMatch(/^error TG_USAGE: --redis/)
    expect(human.stderr).toMatch(reason)
    expect(human.stdout).toBe('')
    expectNoSecret(human)
    expect(json.code, json.stderr).toBe(2)
    expect(JSON.parse(json.stdout).error).toEqual({ code: 'TG_USAGE', message: expect.stringMatching(reason) })
    expectNoSecret(json)
  })

  it('names REDIS_URL when the URL came from there', async () => {
    const run = await runCli(['doctor'], { env: { REDIS_URL: `redis://:${SECRET}@127.0.0.1:99999` } })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain(
      'error TG_USAGE: REDIS_URL: the port must be a number from 1 to 65535, got 99999, in "redis://:***@127.0.0.1:99999"',
    )
    expectNoSecret(run)
  })

  it('masks a URL the argument parser quotes back', async () => {
    const run = await runCli([`redis://:${SECRET}@127.0.0.1:6379`, 'doctor'])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain("unknown command 'redis://:***@127.0.0.1:6379'")
    expectNoSecret(run)
  })
})

describe('a --redis URL with a password, where Redis is reached or not', () => {
  let server: SpawnedRedis
  let client: Redis
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
    await client.config('SET', 'requirepass', SECRET)
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })

  it('doctor shows the URL masked, and a password with reserved characters needs no escaping', async () => {
    // A password may hold '@', '/', '?' or '#' as written: all before the last '@' is the credentials.
    const reserved = `${SECRET}/@?#`
    await client.auth(SECRET)
    await client.config('SET', 'requirepass', reserved)
    try {
      const run = await runCli(['--redis', `redis://:${reserved}@127.0.0.1:${server.port}/0`, '--json', 'doctor'])
      expect(run.code, run.stdout).toBe(0)
      const result = JSON.parse(run.stdout) as { redis: string; checks: Array<{ name: string; message: string }> }
      expect(result.redis).toBe(`redis://:***@127.0.0.1:${server.port}/0`)
      expect(result.checks[0]?.message).toMatch(
        new RegExp(`^redis://:\\*\\*\\*@127\\.0\\.0\\.1:${server.port}/0 \\(standalone\\)`),
      )
      expectNoSecret(run)
    } finally {
      await client.auth(reserved)
      await client.config('SET', 'requirepass', SECRET)
    }
  })

  it('a refused password fails with exit 1 and the URL masked', async () => {
    const run = await runCli(['--redis', `redis://default:${SECRET}x@127.0.0.1:${server.port}`, 'doctor'])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(
      new RegExp(
        `^connection +fail +cannot reach Redis at redis://default:\\*\\*\\*@127\\.0\\.0\\.1:${server.port}: WRONGPASS`,
        'm',
      ),
    )
    expectNoSecret(run)
  })

  it('a closed port fails with exit 1 and the URL masked, on stdout and in --json', async () => {
    const port = await findFreePort()
    const url = `redis://:${SECRET}@127.0.0.1:${port}`
    const [human, json] = await Promise.all([
      runCli(['--redis', url, 'doctor']),
      runCli(['--redis', url, '--json', 'inspect', 'api', 'ip:1']),
    ])
    expect(human.code).toBe(1)
    expect(human.stdout).toContain(`cannot reach Redis at redis://:***@127.0.0.1:${port}: connect ECONNREFUSED`)
    expectNoSecret(human)
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout).error.code).toBe('TG_REDIS')
    expectNoSecret(json)
  })
})
