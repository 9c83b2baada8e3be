import type { Redis } from 'ioredis'

/** Every key under `prefix`, found by SCAN so a busy server is not blocked. */
async function keysUnder(client: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000)
    keys.push(...batch)
    cursor = next
  } while (cursor !== '0')
  return keys
}

/** Every key under `prefix` with its PTTL (-1: no TTL). */
export async function keysWithTtl(client: Redis, prefix: string): Promise<Array<{ key: string; ttlMs: number }>> {
  const keys = await keysUnder(client, prefix)
  const ttls = await Promise.all(keys.map((key) => client.pttl(key)))
  return keys.map((key, i) => ({ key, ttlMs: ttls[i] as number }))
}

/**
 * Every key under `prefix` with its value as DUMP serializes it, whatever its type: two snapshots
 * are equal when no key's value changed and none was added or removed in between.
 */
export async function keyValues(client: Redis, prefix: string): Promise<Record<string, string>> {
  const keys = (await keysUnder(client, prefix)).sort()
  const values = await Promise.all(keys.map((key) => client.dumpBuffer(key)))
  return Object.fromEntries(keys.map((key, i) => [key, values[i]?.toString('hex') ?? 'gone']))
}
