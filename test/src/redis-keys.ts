import type { Redis } from 'ioredis'

/** Every key under `prefix` with its PTTL (-1: no TTL), found by SCAN so a busy server is not blocked. */
export async function keysWithTtl(client: Redis, prefix: string): Promise<Array<{ key: string; ttlMs: number }>> {
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000)
    keys.push(...batch)
    cursor = next
  } while (cursor !== '0')
  const ttls = await Promise.all(keys.map((key) => client.pttl(key)))
  return keys.map((key, i) => ({ key, ttlMs: ttls[i] as number }))
}
