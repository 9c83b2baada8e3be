import './provided-context.js'

export { redisUrlForTests, useRedis } from './flush-between.js'
export { findFreePort } from './free-port.js'
export { type RedisSource, type StartedRedis, startRedis } from './redis-harness.js'
export { type SpawnedRedis, type SpawnRedisServerOptions, spawnRedisServer } from './redis-server.js'
