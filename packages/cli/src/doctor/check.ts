import type { Connection } from '../redis.js'
import type { Session } from '../session.js'

export type CheckStatus = 'ok' | 'warn' | 'fail'

/** One line of `tollgate doctor`; `details` are for `--json`. */
export interface CheckResult {
  name: string
  status: CheckStatus
  message: string
  details?: Record<string, unknown>
}

/** One check: a module of its own, listed in `doctor/checks.ts`. */
export interface Check {
  readonly name: string
  run(connection: Connection, session: Session): Promise<Omit<CheckResult, 'name'>>
}

/** Every Redis node a check should ask: the masters of a Cluster, or the one server. */
export function nodesOf(connection: Connection): Array<Connection['client']> {
  const { client } = connection
  return connection.cluster && 'nodes' in client ? client.nodes('master') : [client]
}
