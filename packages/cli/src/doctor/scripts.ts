import { REDIS_SCRIPTS } from '@tollgate/core'
import { messageOf } from '../errors.js'
import { type Check, nodesOf } from './check.js'

/**
 * SCRIPT LOAD of every script Tollgate runs, on every node that may run one: a server that
 * refuses scripts (an ACL without EVAL, a managed service), or one whose Lua differs, says so
 * here and not on the first decision.
 */
export const scripts: Check = {
  name: 'scripts',
  async run(connection) {
    const failures: string[] = []
    const nodes = nodesOf(connection)
    for (const [name, script] of Object.entries(REDIS_SCRIPTS)) {
      for (const node of nodes) {
        try {
          const sha = await node.script('LOAD', script.lua)
          if (sha !== script.sha1) failures.push(`${name}: SCRIPT LOAD answered ${String(sha)}, not ${script.sha1}`)
        } catch (error) {
          failures.push(`${name}: ${messageOf(error)}`)
        }
      }
    }
    const names = Object.keys(REDIS_SCRIPTS)
    const details = { scripts: Object.fromEntries(Object.entries(REDIS_SCRIPTS).map(([n, s]) => [n, s.sha1])) }
    if (failures.length > 0) return { status: 'fail', message: failures.join('; '), details }
    const where = nodes.length === 1 ? '' : ` on ${nodes.length} masters`
    return { status: 'ok', message: `${names.length} scripts load (${names.join(', ')})${where}`, details }
  },
}
