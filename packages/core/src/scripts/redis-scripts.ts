import { decideScript, leaseScript, publishRulesScript, readRulesScript, resetScript, syncScript } from './generated.js'

/** One Lua script as Tollgate sends it to Redis: `EVALSHA sha1`, falling back to `EVAL lua` on NOSCRIPT. */
export interface RedisScript {
  readonly lua: string
  /** The SHA-1 of `lua`, which `SCRIPT LOAD lua` answers. */
  readonly sha1: string
}

/**
 * Every script Tollgate runs in Redis, by what runs it: `decide` (RedisStore), `sync` and `lease`
 * (HybridStore), `reset` (both stores' resets), `publishRules` and `readRules` (LiveRules). For checking that a server takes
 * them (`SCRIPT LOAD`, as `tollgate doctor` does) before a deploy finds out.
 * @example await redis.script('LOAD', REDIS_SCRIPTS.decide.lua) // resolves to REDIS_SCRIPTS.decide.sha1
 */
export const REDIS_SCRIPTS: Readonly<
  Record<'decide' | 'sync' | 'lease' | 'reset' | 'publishRules' | 'readRules', RedisScript>
> = Object.freeze({
  decide: decideScript,
  sync: syncScript,
  lease: leaseScript,
  reset: resetScript,
  publishRules: publishRulesScript,
  readRules: readRulesScript,
})
