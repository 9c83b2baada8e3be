import { type Check, nodesOf } from './check.js'

const SLOTS = 16_384

/**
 * Every slot assigned and served, as every master sees it: a decision whose key hashes to a slot
 * without a master fails (CLUSTERDOWN), and a node that disagrees has not heard of a change yet.
 */
export const cluster: Check = {
  name: 'cluster',
  async run(connection) {
    if (!connection.cluster) {
      return { status: 'ok', message: 'not a Cluster (cluster_enabled:0): one server holds every key' }
    }
    const views = await Promise.all(nodesOf(connection).map(async (node) => viewOf(String(await node.cluster('INFO')))))
    const worst = (field: keyof View, pick: (...values: number[]) => number) =>
      pick(...views.map((v) => v[field] as number))
    const state = views.every((view) => view.state === 'ok')
      ? 'ok'
      : (views.find((v) => v.state !== 'ok')?.state ?? 'unknown')
    const assigned = worst('assigned', Math.min)
    const ok = worst('ok', Math.min)
    const pfail = worst('pfail', Math.max)
    const failed = worst('failed', Math.max)
    const masters = views.length
    const details = { state, slotsAssigned: assigned, slotsOk: ok, slotsPfail: pfail, slotsFail: failed, masters }
    const text = `state ${state}, ${ok} of ${SLOTS} slots served, ${masters} master${masters === 1 ? '' : 's'}`
    if (state !== 'ok' || assigned < SLOTS || failed > 0) {
      const unassigned = SLOTS - assigned
      const slots =
        unassigned === 1
          ? '1 slot has no master, and decisions on its'
          : `${unassigned} slots have no master, and decisions on their`
      const why = unassigned > 0 ? `: ${slots} keys fail` : ''
      return { status: 'fail', message: `${text}${why}`, details }
    }
    if (pfail > 0) return { status: 'warn', message: `${text}; ${pfail} slots on nodes suspected down`, details }
    return { status: 'ok', message: text, details }
  },
}

interface View {
  state: string
  assigned: number
  ok: number
  pfail: number
  failed: number
}

function viewOf(info: string): View {
  const field = (name: string) => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1]
  const number = (name: string) => Number(field(name) ?? Number.NaN)
  return {
    state: field('cluster_state') ?? 'unknown',
    assigned: number('cluster_slots_assigned'),
    ok: number('cluster_slots_ok'),
    pfail: number('cluster_slots_pfail'),
    failed: number('cluster_slots_fail'),
  }
}
