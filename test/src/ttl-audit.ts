import { Redis } from 'ioredis'

const SCAN_COUNT = 1_000
// PTTL answers -1 for a key that exists without an expiry (-2 for one that is gone).
const NO_TTL = -1
const LISTED_KEYS = 20
const LISTED_KEY_CHARS = 120

/**
 * Every key on the server that would live forever, found by SCAN so a busy server is not blocked.
 * SCAN may return a key more than once while the keyspace is rehashed, hence the set.
 */
export async function keysWithoutTtl(client: Redis): Promise<string[]> {
  const forever = new Set<string>()
  let cursor = '0'
  do {
    const [next, batch] = await client.scan(cursor, 'COUNT', SCAN_COUNT)
    cursor = next
    if (batch.length === 0) continue
    const pipeline = client.pipeline()
    for (const key of batch) pipeline.pttl(key)
    const replies = (await pipeline.exec()) ?? []
    batch.forEach((key, i) => {
      const [error, ttlMs] = replies[i] ?? [new Error(`PTTL ${key}: no reply`)]
      if (error) throw error
      if (ttlMs === NO_TTL) forever.add(key)
    })
  } while (cursor !== '0')
  return [...forever]
}

/**
 * Throws, listing the first keys, when the server at `url` holds any key without a TTL: every key
 * Tollgate writes must expire, so such a key is state some test leaves behind forever.
 */
export async function assertEveryKeyExpires(url: string): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null })
  // The awaited commands reject with the same error.
  client.on('error', () => {})
  let forever: string[]
  try {
    await client.connect()
    forever = await keysWithoutTtl(client)
  } finally {
    client.disconnect()
  }
  if (forever.length === 0) return
  const listed = forever.slice(0, LISTED_KEYS).map((key) => `  - ${JSON.stringify(shortened(key))}`)
  const more = forever.length > LISTED_KEYS ? [`  … and ${forever.length - LISTED_KEYS} more`] : []
  throw new Error(
    [
      `TTL audit failed: ${forever.length} key(s) on the test Redis have no TTL (PTTL -1) after the whole run.`,
      'Every key must expire; the tests that wrote these (see their prefixes) leave state behind forever:',
      ...listed,
      ...more,
    ].join('\n'),
  )
}

function shortened(key: string): string {
  return key.length > LISTED_KEY_CHARS ? `${key.slice(0, LISTED_KEY_CHARS)}… (${key.length} chars)` : key
}
