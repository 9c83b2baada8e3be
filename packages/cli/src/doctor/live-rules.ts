import { messageOf } from '../errors.js'
import type { Check } from './check.js'

/** The epoch published under the prefix, and whether this process could take every stored rule. */
export const liveRules: Check = {
  name: 'live rules',
  async run(_connection, session) {
    let live: Awaited<ReturnType<typeof session.liveRules>>
    try {
      live = await session.liveRules()
    } catch (error) {
      return { status: 'fail', message: `cannot read the live rules: ${messageOf(error)}` }
    }
    const { epoch, stale, rejected } = live.status()
    const prefix = JSON.stringify(session.options.prefix)
    const details = { epoch, stale, rejected }
    if (stale) return { status: 'fail', message: `the live rules under ${prefix} could not be read`, details }
    if (rejected.length > 0) {
      const rules = rejected.map((r) => `'${r.rule}' (epoch ${r.epoch}): ${r.message}`).join('; ')
      return {
        status: 'warn',
        message: `epoch ${epoch} under ${prefix}; stored rules that do not resolve: ${rules}`,
        details,
      }
    }
    if (epoch === 0) return { status: 'ok', message: `none published under ${prefix} (epoch 0)`, details }
    const versions = await live.history()
    const last = versions[0]
    const when = last?.epoch === epoch ? `, last published ${new Date(last.publishedAtMs).toISOString()}` : ''
    return { status: 'ok', message: `epoch ${epoch} under ${prefix}${when}`, details }
  },
}
