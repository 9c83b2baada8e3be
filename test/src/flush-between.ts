import { Redis } from 'ioredis'
import { afterAll, beforeAll, inject } from 'vitest'
import './provided-context.js'

export function redisUrlForTests(): string {
  return inject('redisUrl')
}

/**
 * A client for the current test file, connected before its first test and closed after its last.
 * Nothing is flushed: test files run in parallel against one server, so each keeps to its own
 * key prefix instead.
 */
export function useRedis(): () => Redis {
  let client: Redis | undefined
  beforeAll(async () => {
    client = new Redis(redisUrlForTests(), { lazyConnect: false, maxRetriesPerRequest: 1 })
    // Fails here, once, rather than in every test when the server is unreachable.
    await client.ping()
  })
  afterAll(async () => {
    await client?.quit()
    client = undefined
  })
  return () => {
    if (client === undefined) {
      throw new Error('useRedis(): the client exists only from beforeAll to afterAll; call the getter inside a test')
    }
    return client
  }
}
