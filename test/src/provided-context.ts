declare module 'vitest' {
  export interface ProvidedContext {
    /** The Redis that global-setup started or found; see startRedis(). */
    redisUrl: string
  }
}
