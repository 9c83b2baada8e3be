import './provided-context.js'

export { redisUrlForTests, useRedis } from './flush-between.js'
export { findFreePort } from './free-port.js'
export {
  clusterClient,
  clusterMasters,
  masterOfSlot,
  migrateSlot,
  type SpawnedCluster,
  type SpawnRedisClusterOptions,
  spawnRedisCluster,
  waitReady,
} from './redis-cluster.js'
export { type RedisSource, type StartedRedis, startRedis } from './redis-harness.js'
export {
  type SpawnedSentinel,
  type SpawnedSentinelProcess,
  type SpawnRedisSentinelOptions,
  sentinelClient,
  spawnRedisSentinel,
  waitForFailover,
} from './redis-sentinel.js'
export { type SpawnedRedis, type SpawnRedisServerOptions, spawnRedisServer } from './redis-server.js'
