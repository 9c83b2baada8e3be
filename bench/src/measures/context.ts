import type { Redis } from 'ioredis'
import type { BenchConfig } from '../config.js'
import type { Progress } from '../progress.js'

export interface MeasureContext {
  config: BenchConfig
  redisUrl: string
  /** The client contenders use, made with ioredis' defaults. */
  client: Redis
  /** A second connection for INFO, FLUSHALL and CONFIG RESETSTAT, so that they never mix with a contender's traffic. */
  admin: Redis
  progress: Progress
}
