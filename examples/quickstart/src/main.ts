import { createLimiter, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import { Redis } from 'ioredis'
import { rules, runDemo } from './demo.js'

// The demo replays a minute of attempts in an instant, so it moves its own clock.
let now = Date.now()
const clock = { now: () => now, set: (ms: number) => (now = ms) }

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
const store: Store = redis
  ? new RedisStore({ client: redis, clock: clock.now, prefix: `tollgate-demo:${process.pid}:` })
  : new MemoryStore({ clock: clock.now })
const limiter = createLimiter({ store, rules })

console.log(`Tollgate quickstart on the ${redis ? `Redis store (${process.env.REDIS_URL})` : 'in-memory store'}`)
await runDemo(limiter, clock, now, (line) => console.log(line))
await limiter.close()
redis?.disconnect()
