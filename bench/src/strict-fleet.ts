import { loadavg } from 'node:os'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'
import { LineChild } from './child-process.js'
import { CONTENDERS } from './contenders/index.js'
import type { FleetOutcome, FleetRun } from './strict-fleet-worker.js'

/*
 * Strict HybridStores against the incumbents' Redis-backed limiters, each as a fleet of
 * PROCESSES processes on one redis-server, offered about 6× the limit: every contender first runs
 * for a second unlimited, then for up to CALIBRATIONS seconds with the limit moved toward a sixth
 * of what it decides (a limiter that refuses in the process decides faster once it refuses) until
 * about a sixth of its decisions are admitted, then MEASURE_MS at that limit; the admitted share
 * says how close to 6× it came. Decisions/s are the fleet's; "waited" is the share of decisions
 * that waited on Redis (every one, for a limiter that calls Redis per decision). Run with `pnpm --filter @tollgate/bench strict-fleet` after
 * `pnpm build`; it starts its own redis-server.
 */

const PROCESSES = 4
const CALLERS = 16
const IDENTIFIERS = 100
const PERIOD_MS = 1_000
const CALIBRATE_MS = 1_000
/** At most this many one-second runs to bring the admitted share near 1 ÷ OVERLOAD. */
const CALIBRATIONS = 8
const MEASURE_MS = 3_000
const OVERLOAD = 6
const STRICT_ID = 'tollgate/hybrid-strict/fixed-window'

const server = await spawnRedisServer()
const admin = new Redis(server.url)
const workers = Array.from({ length: PROCESSES }, () => new LineChild('strict-fleet-worker.ts', [server.url]))
try {
  await Promise.all(workers.map((worker) => worker.receive()))
  const contenders = [
    STRICT_ID,
    ...CONTENDERS.filter((c) => c.role === 'incumbent' && c.store === 'redis' && c.shapes.includes('one-window')).map(
      (c) => c.id,
    ),
  ]
  const rows: Array<{ id: string; perSecond: number; admitted: number; waited: number; failed: number }> = []
  for (const id of contenders) {
    const fleet = async (limit: number, ms: number) => {
      await admin.flushall()
      const run: FleetRun = { id, limit, periodMs: PERIOD_MS, ms, identifiers: IDENTIFIERS, callers: CALLERS }
      const outcomes = await Promise.all(workers.map((worker) => worker.request<FleetOutcome>(JSON.stringify(run))))
      const sum = (pick: (o: FleetOutcome) => number) => outcomes.reduce((total, o) => total + pick(o), 0)
      return {
        decisions: sum((o) => o.decisions),
        admitted: sum((o) => o.admitted),
        waited: sum((o) => o.waited),
        failed: sum((o) => o.failed),
      }
    }
    // A limiter that refuses in the process decides faster once it refuses: the limit follows
    // what it decides under it until about a sixth of its decisions are admitted.
    let limit = 1_000_000_000
    for (let round = 0; round < CALIBRATIONS; round++) {
      const run = await fleet(limit, CALIBRATE_MS)
      const share = run.admitted / run.decisions
      if (share > 0.8 / OVERLOAD && share < 1.25 / OVERLOAD) break
      const offered = ((run.decisions / CALIBRATE_MS) * PERIOD_MS) / IDENTIFIERS
      limit = Math.max(1, Math.round(round === 0 ? offered / OVERLOAD : Math.sqrt(limit * (offered / OVERLOAD))))
    }
    const measured = await fleet(limit, MEASURE_MS)
    rows.push({
      id,
      perSecond: (measured.decisions / MEASURE_MS) * 1_000,
      admitted: measured.admitted / measured.decisions,
      waited: measured.waited / measured.decisions,
      failed: measured.failed,
    })
    process.stderr.write(`${id}: limit ${limit} per ${PERIOD_MS} ms per identifier, ${JSON.stringify(measured)}\n`)
  }
  const fastest = Math.max(...rows.filter((row) => row.id !== STRICT_ID).map((row) => row.perSecond))
  const lines = [
    `Strict fleet: ${PROCESSES} processes × ${CALLERS} callers, ${IDENTIFIERS} identifiers, fixed window per ${PERIOD_MS} ms, offered about ${OVERLOAD}× the limit; load ${loadavg()[0]?.toFixed(2)}`,
    '',
    '| contender | decisions/s | ÷ fastest incumbent | admitted | waited on Redis | failed |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (row) =>
        `| ${row.id} | ${Math.round(row.perSecond).toLocaleString('en-US')} | ${(row.perSecond / fastest).toFixed(2)} | ${(100 * row.admitted).toFixed(1)}% | ${(100 * row.waited).toFixed(2)}% | ${row.failed} |`,
    ),
  ]
  process.stdout.write(`${lines.join('\n')}\n`)
} finally {
  await Promise.all(workers.map((worker) => worker.close()))
  admin.disconnect()
  await server.stop()
}
