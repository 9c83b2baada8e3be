import type { Redis } from 'ioredis'
import { type Contender, requireClient } from './contender.js'

/** The least a Redis rate limiter can do: count and expire one key, in one script. */
export const CEILING_LUA = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`

export async function loadCeilingScript(client: Redis): Promise<string> {
  return (await client.script('LOAD', CEILING_LUA)) as string
}

export const rawEvalshaContender: Contender = {
  id: 'ceiling/raw-evalsha',
  library: 'ceiling',
  variant: 'raw ioredis EVALSHA',
  store: 'redis',
  role: 'ceiling',
  shapes: ['one-window'],
  call: 'client.evalsha(sha, 1, key, periodMs) of INCR + PEXPIRE on first hit; no limiter code at all',
  async setup(options) {
    const client = requireClient(options, this.id)
    const sha = await loadCeilingScript(client)
    const period = String(options.periodMs)
    return {
      async decide([key]) {
        return ((await client.evalsha(sha, 1, key as string, period)) as number) <= options.limit
      },
      teardown: async () => {},
    }
  },
}
