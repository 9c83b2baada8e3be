import { createLimiter, type Limiter, MemoryStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { Fleet, livePrefix } from '../src/live-rules-fixtures.js'

let client: Redis
let fleet: Fleet | undefined
const opened: Array<Limiter | MemoryStore> = []
beforeAll(() => {
  client = new Redis(inject('redisUrl'))
})
afterAll(async () => {
  await client.quit()
})
afterEach(async () => {
  await Promise.all(opened.splice(0).map((closable) => closable.close()))
  await fleet?.close()
})

function newFleet(name: string): Fleet {
  fleet = new Fleet(client, livePrefix(name))
  return fleet
}

function memoryStore(): MemoryStore {
  const store = new MemoryStore({ sweepIntervalMs: 0 })
  opened.push(store)
  return store
}

/** A limiter and the codes of the warnings it gave. */
function limiterOf(options: Parameters<typeof createLimiter>[0]) {
  const codes: string[] = []
  const limiter = createLimiter({ ...options, onWarning: (_message, code) => codes.push(code) })
  opened.push(limiter)
  return { limiter, codes }
}

// The fixtures' defaults: api, fixed-window, 10 per minute.
const API = { api: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1m' }] } } as const

describe('live rules that give a rule other limits than another limiter on the same store', () => {
  it('warn the limiter that follows them once it applies the change, and once only', async () => {
    const live = newFleet('clash').add()
    const store = memoryStore()
    const inCode = limiterOf({ store, rules: API })
    const following = limiterOf({ store, rules: live })
    expect(following.codes).toEqual([])

    await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } })
    expect(following.limiter.rules.get('api')?.windows[0]?.limit).toBe(20)
    expect(following.codes).toEqual(['TG_RULE_NAME_CLASH'])
    await live.publish({ search: { windows: [{ limit: 1, period: '1m' }] } })
    expect(following.codes).toEqual(['TG_RULE_NAME_CLASH'])
    expect(inCode.codes).toEqual([])
  })

  it('never warn between limiters that follow the same live rules', async () => {
    const live = newFleet('together').add()
    const store = memoryStore()
    const limiters = [limiterOf({ store, rules: live }), limiterOf({ store, rules: live })]
    await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 20, period: '1m' }] } })
    await live.publish({ api: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }] } })
    expect(limiters.map(({ limiter }) => limiter.rules.get('api')?.windows[0]?.limit)).toEqual([5, 5])
    expect(limiters.map(({ codes }) => codes)).toEqual([[], []])
  })
})
