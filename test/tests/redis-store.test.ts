import { RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { inject } from 'vitest'
import { keysWithTtl } from '../src/redis-keys.js'
import { runStoreConformance } from '../src/store-conformance.js'

runStoreConformance('RedisStore', async () => {
  const client = new Redis(inject('redisUrl'))
  let prefix = ''
  let made = 0
  return {
    makeStore(clock) {
      prefix = `conformance:${process.pid}:${made++}:`
      return new RedisStore({ client, clock, prefix })
    },
    keys: () => keysWithTtl(client, prefix),
    close: async () => {
      await client.quit()
    },
  }
})
