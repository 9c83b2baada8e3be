import type { CommandModule } from '../command.js'
import type { CheckResult, CheckStatus } from '../doctor/check.js'
import { CHECKS } from '../doctor/checks.js'
import { messageOf } from '../errors.js'
import { span } from '../format.js'
import type { Connection } from '../redis.js'
import type { Session } from '../session.js'

/** `tollgate doctor --json`: `ok` is false when any check failed (exit 1); warnings leave it true. */
export interface DoctorResult {
  ok: boolean
  redis: string | null
  checks: CheckResult[]
}

export const doctor: CommandModule = {
  register(program, run) {
    program
      .command('doctor')
      .description('check Redis for Tollgate: version, scripts, clock, Cluster slots, live rules, hybrid processes')
      .action(
        run(async (session: Session) => {
          const result = await diagnosed(session)
          if (!result.ok) session.exitCode = 1
          session.out.result<DoctorResult>(result, (r) => render(session, r))
        }),
      )
  },
}

async function diagnosed(session: Session): Promise<DoctorResult> {
  const startedAt = performance.now()
  let connection: Connection
  try {
    connection = await session.redis()
  } catch (error) {
    if ((error as { exitCode?: unknown }).exitCode === 2) throw error
    const check: CheckResult = { name: 'connection', status: 'fail', message: messageOf(error) }
    return { ok: false, redis: null, checks: [check] }
  }
  const kind = connection.cluster ? 'Cluster' : 'standalone'
  const checks: CheckResult[] = [
    {
      name: 'connection',
      status: 'ok',
      message: `${connection.url} (${kind}), connected in ${span(performance.now() - startedAt)}`,
      details: { cluster: connection.cluster },
    },
  ]
  for (const check of CHECKS) {
    try {
      checks.push({ name: check.name, ...(await check.run(connection, session)) })
    } catch (error) {
      checks.push({ name: check.name, status: 'fail', message: messageOf(error) })
    }
  }
  return { ok: checks.every((check) => check.status !== 'fail'), redis: connection.url, checks }
}

function render(session: Session, result: DoctorResult): string {
  const { color } = session.out
  const paint: Record<CheckStatus, (text: string) => string> = { ok: color.green, warn: color.yellow, fail: color.red }
  const rows = session.out.table<CheckResult>(
    [
      { header: 'CHECK', value: (c) => c.name },
      { header: 'STATUS', value: (c) => paint[c.status](c.status) },
      { header: 'DETAIL', value: (c) => c.message },
    ],
    result.checks,
  )
  const failed = result.checks.filter((c) => c.status === 'fail').length
  const warned = result.checks.filter((c) => c.status === 'warn').length
  const summary =
    failed > 0
      ? color.red(`${failed} failed`)
      : warned > 0
        ? color.yellow(`${warned} warning${warned === 1 ? '' : 's'}, nothing failed`)
        : color.green('all good')
  return `${rows}\n${summary}`
}
