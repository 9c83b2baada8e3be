import type { Redis } from 'ioredis'

function fields(info: string): Map<string, string> {
  const map = new Map<string, string>()
  for (const line of info.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon > 0 && !line.startsWith('#')) map.set(line.slice(0, colon), line.slice(colon + 1))
  }
  return map
}

/** CPU seconds the Redis server has used, user and system, all threads. */
export async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = fields(await admin.info('cpu'))
  return Number(info.get('used_cpu_user')) + Number(info.get('used_cpu_sys'))
}

export async function usedMemory(admin: Redis): Promise<number> {
  return Number(fields(await admin.info('memory')).get('used_memory'))
}

export interface CommandStat {
  calls: number
  /** Time Redis spent in the command, µs; for EVALSHA this includes the commands its script ran. */
  usec: number
}

/** Per command since the last CONFIG RESETSTAT; Redis 7 counts commands a script runs under their own names too. */
export async function commandStats(admin: Redis): Promise<Map<string, CommandStat>> {
  const stats = new Map<string, CommandStat>()
  for (const [name, value] of fields(await admin.info('commandstats'))) {
    const match = /^calls=(\d+),usec=(\d+)/.exec(value)
    if (name.startsWith('cmdstat_') && match) {
      stats.set(name.slice('cmdstat_'.length), { calls: Number(match[1]), usec: Number(match[2]) })
    }
  }
  return stats
}

export async function redisVersion(admin: Redis): Promise<string> {
  return fields(await admin.info('server')).get('redis_version') ?? 'unknown'
}

export interface ClientTraffic {
  /** Commands handed to ioredis' `sendCommand` (a MULTI/EXEC pipeline counts each command). */
  commands: number
  /** `write` calls on the socket: with one decision in flight, the round trips. */
  writes: number
  bytesWritten: number
  bytesRead: number
  reset(): void
}

/** Counts what one ioredis client sends and receives; install once the client is ready. */
export function instrument(client: Redis): ClientTraffic {
  const traffic: ClientTraffic = {
    commands: 0,
    writes: 0,
    bytesWritten: 0,
    bytesRead: 0,
    reset() {
      traffic.commands = 0
      traffic.writes = 0
      traffic.bytesWritten = 0
      traffic.bytesRead = 0
    },
  }
  const sendCommand = client.sendCommand.bind(client)
  client.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
    traffic.commands++
    return sendCommand(...args)
  }
  const stream = client.stream
  const write = stream.write.bind(stream) as (chunk: string | Buffer, ...rest: unknown[]) => boolean
  stream.write = ((chunk: string | Buffer, ...rest: unknown[]) => {
    traffic.writes++
    traffic.bytesWritten += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length
    return write(chunk, ...rest)
  }) as typeof stream.write
  stream.on('data', (chunk: Buffer) => {
    traffic.bytesRead += chunk.length
  })
  return traffic
}
