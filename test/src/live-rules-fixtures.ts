import { randomUUID } from 'node:crypto'
import { LiveRules, type LiveRulesOptions, type RulesOptions } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { keysWithTtl } from './redis-keys.js'

/** A prefix of its own per test: files run in parallel on one server. */
export function livePrefix(name: string): string {
  return `live:${name}:${process.pid}:${randomUUID().slice(0, 8)}:`
}

export const DEFAULTS = {
  api: { algorithm: 'fixed-window', windows: [{ limit: 10, period: '1m' }] },
  search: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }], parent: 'api' },
} satisfies RulesOptions

/**
 * LiveRules instances standing for the processes of a fleet, each closed by `close()`. They
 * neither poll nor hear nudges unless asked: tests call `refresh()`, so that nothing changes
 * rules behind their back.
 */
export class Fleet {
  readonly instances: LiveRules[] = []
  readonly warnings: Array<{ code: string; message: string }> = []

  constructor(
    private readonly client: Redis,
    readonly prefix: string,
    private readonly defaults: RulesOptions = DEFAULTS,
  ) {}

  add(options: Partial<LiveRulesOptions> = {}): LiveRules {
    const live = new LiveRules({
      client: this.client,
      defaults: this.defaults,
      prefix: this.prefix,
      pollIntervalMs: 0,
      nudges: false,
      onWarning: (message, code) => this.warnings.push({ code, message }),
      ...options,
    })
    this.instances.push(live)
    return live
  }

  /** Closes every instance and deletes the rules' keys, which have no TTL (they are configuration). */
  async close(): Promise<void> {
    await Promise.all(this.instances.map((live) => live.close()))
    const keys = (await keysWithTtl(this.client, `${this.prefix}{rules}:`)).map((entry) => entry.key)
    if (keys.length > 0) await this.client.del(...keys)
  }
}
