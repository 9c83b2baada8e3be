import type { Check } from './check.js'

const SLOTS = 16_384

/** Every slot assigned and served: a decision whose key hashes to an uncovered slot fails (CLUSTERDOWN). */
export const cluster: Check = {
  name: 'cluster',
  async run(connection) {
    if (!connection.cluster) {
      return { status: 'ok', message: 'not a Cluster (cluster_enabled:0): one server holds every key' }
    }
    const info = String(await connection.client.cluster('INFO'))
    const field = (name: string) => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1]
    const number = (name: string) => Number(field(name) ?? Number.NaN)
    const state = field('cluster_state') ?? 'unknown'
    const assigned = number('cluster_slots_assigned')
    const ok = number('cluster_slots_ok')
    const pfail = number('cluster_slots_pfail')
    const failed = number('cluster_slots_fail')
    const masters = 'nodes' in connection.client ? connection.client.nodes('master').length : 1
    const details = { state, slotsAssigned: assigned, slotsOk: ok, slotsPfail: pfail, slotsFail: failed, masters }
    const text = `state ${state}, ${ok} of ${SLOTS} slots served, ${masters} master${masters === 1 ? '' : 's'}`
    if (state !== 'ok' || assigned < SLOTS || failed > 0) {
      const unassigned = SLOTS - assigned
      const why = unassigned > 0 ? `: ${unassigned} slots have no master, and decisions on their keys fail` : ''
      return { status: 'fail', message: `${text}${why}`, details }
    }
    if (pfail > 0) return { status: 'warn', message: `${text}; ${pfail} slots on nodes suspected down`, details }
    return { status: 'ok', message: text, details }
  },
}
