// Internal modules of incumbents that ship no types for them; declared as far as the bench uses them.

declare module '@fastify/rate-limit/store/LocalStore.js' {
  const LocalStore: new (continueExceeding: boolean, exponentialBackoff: boolean, cache?: number) => unknown
  export default LocalStore
}

declare module '@fastify/rate-limit/store/RedisStore.js' {
  const RedisStore: new (
    continueExceeding: boolean,
    exponentialBackoff: boolean,
    redis: unknown,
    key?: string,
  ) => unknown
  export default RedisStore
}

declare module 'koa-ratelimit/limiter/memory.js' {
  const MemoryLimiter: new (options: {
    id: string
    db: Map<unknown, unknown>
    max: number
    duration: number
  }) => unknown
  export default MemoryLimiter
}

declare module 'koa-ratelimit/limiter/redis.js' {
  const RedisLimiter: new (options: { id: string; db: unknown; max: number; duration: number }) => unknown
  export default RedisLimiter
}
