import { createLimiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pollUntil } from '../src/poll.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

// Regression: a decision that stopped waiting (and refused) was still charged when the paused
// server later ran its script, so a refused request consumed quota.
describe('an answer that arrives after the decision stopped waiting', () => {
  let server: SpawnedRedis
  let client: Redis
  /** The operation of every decision request the client sent, in order ('consume', 'undo'…). */
  let operations: string[]
  beforeAll(async () => {
    server = await spawnRedisServer()
    client = new Redis(server.url)
    operations = []
    const send = client.sendCommand.bind(client)
    client.sendCommand = (command, stream) => {
      for (const arg of command.args) {
        const operation = /^(consume|peek|refund|undo) /.exec(String(arg))?.[1]
        if (operation) operations.push(operation)
      }
      return send(command, stream)
    }
  })
  afterAll(async () => {
    client.disconnect()
    await server.stop()
  })

  const rules = { login: { windows: [{ limit: 5, period: '1h' }] } } satisfies RulesOptions

  async function lateConsume(policy: 'allow' | 'deny' | 'local', identifier: string) {
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `late:${policy}:` }),
      rules,
      onStoreError: policy,
      storeTimeoutMs: 100,
    })
    server.kill('SIGSTOP')
    let decision: Awaited<ReturnType<typeof limiter.consume>>
    try {
      decision = await limiter.consume('login', identifier)
    } finally {
      server.kill('SIGCONT')
    }
    return { limiter, decision }
  }

  it.each(['deny', 'local'] as const)(
    'is taken back under %s, so the refused request consumed nothing',
    async (policy) => {
      operations.length = 0
      const { limiter, decision } = await lateConsume(policy, `user:${policy}`)
      expect(decision.reason).toBe(policy === 'deny' ? 'store-error-denied' : 'local-fallback')
      // The paused script runs on SIGCONT and charges; the undo is sent once its answer arrives.
      await pollUntil(`the late charge of the ${policy} decision to be taken back`, 5_000, async () =>
        operations.includes('undo') ? { done: true, value: true } : { done: false, state: operations.join(' ') },
      )
      // A peek on the same connection runs after the undo.
      const settled = (await limiter.peek('login', `user:${policy}`)).windows[0]?.remaining
      expect(settled).toBe(5)
      await limiter.close()
    },
  )

  it('stands under allow: the request passed, so its charge is kept', async () => {
    operations.length = 0
    const { limiter, decision } = await lateConsume('allow', 'user:2')
    expect(decision.reason).toBe('store-error-allowed')
    const settled = await pollUntil('the late charge of the allowed decision to land', 5_000, async () => {
      const remaining = (await limiter.peek('login', 'user:2')).windows[0]?.remaining
      return remaining === 4 ? { done: true, value: remaining } : { done: false, state: `remaining ${remaining}` }
    })
    expect(settled).toBe(4)
    expect(operations).not.toContain('undo')
    await limiter.close()
  })
})
