import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { findFreePort, type SpawnedRedis, spawnRedisServer } from '@tollgate/test-support'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { openEventStream } from './event-stream.js'

const packageDir = fileURLToPath(new URL('..', import.meta.url))

// A server of its own: the snippet writes under the default prefix.
let redis: SpawnedRedis
beforeAll(async () => {
  redis = await spawnRedisServer()
})
afterAll(async () => {
  await redis?.stop()
})

it('README opens with a snippet that runs as written: the view it starts shows its refusals', async () => {
  const snippet = /```js\n([\s\S]*?)```/.exec(readFileSync(`${packageDir}README.md`, 'utf8'))?.[1] as string
  expect(snippet).toContain('port: 8099')
  const port = await findFreePort()
  const source = snippet
    .replace("'@tollgate/admin'", JSON.stringify(`${packageDir}src/index.ts`))
    .replace('port: 8099', `port: ${port}`)
  // From the package directory, so that '@tollgate/core' and 'ioredis' resolve as in the reader's app.
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    cwd: packageDir,
    env: { ...process.env, REDIS_URL: redis.url },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    const [line] = (await once(child.stdout, 'data')) as [Buffer]
    const promised = /^\/\/ (admin view on .*)$/m.exec(snippet)?.[1] as string
    expect(line.toString().trim()).toBe(promised.replace('8099', String(port)))
    const url = `http://127.0.0.1:${port}/`
    expect((await fetch(url)).status).toBe(200)
    // The snippet's process flushes once a second, and a second is shown once flushed: its
    // refusals show within about two seconds (its top offenders, every ten).
    const stream = await openEventStream(`${url}events`)
    try {
      const event = await stream.until('the snippet refused ip:203.0.113.7', (e) => e.refusals.length > 0, 8_000)
      expect(event.refusals[0]).toMatchObject({ rule: 'api', window: '60s' })
    } finally {
      stream.close()
    }
  } finally {
    child.kill()
  }
})
