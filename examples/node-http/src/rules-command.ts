import { pathToFileURL } from 'node:url'
import { LiveRules, loadRules, type RuleOptions } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { rules } from './rules.js'

const USAGE = `pnpm rules publish '{"api":{"algorithm":"fixed-window","windows":[{"limit":50,"period":"10s"}]}}'
pnpm rules publish '{"api":null}'          the rule goes back to its default (src/rules.ts)
pnpm rules publish rules.yaml              a rules file (loadRules), every rule it holds
pnpm rules rollback <epoch>                the rules as they were at that epoch, as a new epoch
pnpm rules history [rule]                  the versions published, newest first`

/**
 * Changes the rules of every app process on this Redis: what `pnpm rules …` runs. Returns what to
 * print. A publish is checked as createLimiter checks rules; an invalid one throws and writes nothing.
 */
export async function rulesCommand(client: Redis, args: readonly string[], prefix = 'tg:'): Promise<string> {
  const [command, argument] = args
  // It publishes and leaves: no polling, no subscription.
  const live = new LiveRules({ client, defaults: rules, prefix, pollIntervalMs: 0, nudges: false })
  try {
    await live.refresh()
    switch (command) {
      case 'publish': {
        if (argument === undefined) break
        const changes = argument.trimStart().startsWith('{')
          ? (JSON.parse(argument) as Record<string, RuleOptions | null>)
          : loadRules(argument)
        const { epoch } = await live.publish(changes, { expectedEpoch: live.epoch })
        return `published epoch ${epoch}`
      }
      case 'rollback': {
        if (argument === undefined) break
        const { epoch } = await live.rollback(Number(argument))
        return `rolled back to the rules of epoch ${argument}, as epoch ${epoch}`
      }
      case 'history':
        return JSON.stringify(await live.history(argument), null, 2)
    }
    return USAGE
  } finally {
    await live.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { Redis } = await import('ioredis')
  const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  try {
    console.log(await rulesCommand(client, process.argv.slice(2)))
  } catch (error) {
    console.error(`${(error as { code?: string }).code ?? 'error'}: ${(error as Error).message}`)
    process.exitCode = 1
  } finally {
    await client.quit()
  }
}
