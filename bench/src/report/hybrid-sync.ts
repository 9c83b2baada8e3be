import type { HybridSyncCell } from '../measures/hybrid-sync.js'
import type { BenchResults } from '../results.js'
import { decimal, integer, ratio, table } from './format.js'
import type { TargetRow } from './targets.js'

/** Per key synced, issue targets: Redis's time and the process's CPU (µs), and the Cluster's share of one Redis's time. */
export const SYNC_REDIS_US = 2
export const SYNC_PROCESS_US = 1.5
export const CLUSTER_SHARE = 1 / 3
/** The sync interval capacity is given for: HybridStore's default. */
const DEFAULT_INTERVAL_MS = 1_000

const isFixedWindow = (cell: HybridSyncCell): boolean => (cell.algorithm ?? 'fixed-window') === 'fixed-window'

/** A fixed window's cell: the runs every target and the capacity are read from. */
const find = (results: BenchResults, kind: HybridSyncCell['kind'], sync?: HybridSyncCell['sync']) =>
  results.hybridSync.find(
    (cell) => cell.kind === kind && isFixedWindow(cell) && (sync === undefined || cell.sync === sync),
  )

/** Redis CPU per key a Redis (a Cluster: its busiest master) carried, µs: its share of the keys, spread evenly by hash slot. */
function redisPerKey(cell: HybridSyncCell): number {
  return cell.redisCpuUs / (cell.keys / cell.masters)
}

const processPerKey = (cell: HybridSyncCell): number => cell.processCpuUs / cell.keys

/** Keys per interval one Redis (or master) holds at its whole CPU, and one syncing process's, from a `next` sync. */
export function capacityOf(cell: HybridSyncCell): { redis: number; process: number; measured: number } {
  return {
    redis: (DEFAULT_INTERVAL_MS * 1_000) / redisPerKey(cell),
    process: (DEFAULT_INTERVAL_MS * 1_000) / processPerKey(cell),
    measured: cell.keys / cell.seconds,
  }
}

function label(cell: HybridSyncCell): string {
  switch (cell.kind) {
    case 'one-redis':
      return `one process, one Redis, ${cell.sync} sync${isFixedWindow(cell) ? '' : `, ${cell.algorithm}`}`
    case 'cluster':
      return `one process, ${cell.masters}-master Cluster, ${cell.sync} sync`
    case 'fleet':
      return `${cell.processes} processes at once, one Redis, sync ${cell.rounds}`
    case 'floor-incrby':
      return 'floor: pipelined INCRBY'
    case 'floor-lua-set':
      return 'floor: a script of one SET … KEEPTTL per key'
    case 'floor-lua-set-new':
      return 'floor: a script of one SET … PX … NX per key new to Redis'
  }
}

export function hybridSyncSection(results: BenchResults): string {
  if (results.hybridSync.length === 0) return ''
  const floor = find(results, 'floor-incrby')
  const rows = results.hybridSync.map((cell) => [
    label(cell),
    integer(cell.keys),
    decimal(cell.seconds, 2),
    decimal(redisPerKey(cell), 2),
    decimal(processPerKey(cell), 2),
    floor ? ratio(redisPerKey(cell) / redisPerKey(floor)) : '–',
    cell.kind === 'fleet' ? `${integer(cell.overAdmitted ?? 0)} (bound ${integer(boundOf(cell))})` : '',
  ])
  const parts = [
    '## 10. HybridStore sync at scale',
    `A HybridStore process decides once on each of its keys (fixed window, one window, \`user:<n>\` identifiers), then syncs; the first sync finds the keys new to Redis, the next finds them there in the same window, as every sync after the first of a window does; the rows that name another algorithm run the same on its keys. "Redis µs per key" is the server's CPU (user and system, \`INFO cpu\`) over the sync ÷ keys; on a Cluster, the busiest master's ÷ its share of the keys. "Process µs per key" is the syncing processes' CPU (\`process.cpuUsage\`, every thread) ÷ keys. The floors run on the same Redis in the same run: a pipelined INCRBY per key (500 a pipeline, 4 pipelines in flight), the least a write of a key can cost, a script that only SETs each of its 500 keys KEEPTTL, the least a key's write costs inside a script, and one that SETs each of its 500 keys, new to Redis, with a TTL (PX … NX), the least a new key costs inside a script, as every key of a first sync is (the INCRBY floor's keys have no TTL). The fleet's processes each decide on the same keys (limit ${integer(find(results, 'fleet')?.limit ?? 0)} per hour, one decision per key per process per sync) and sync all at once; its last column is the units the fleet's syncs pushed above the limit, from every process's \`SyncReport.overAdmitted\` since the start, against R·(2T + RTT)·(N−1)/N (docs/hybrid.md) per key with R = N units per sync period T and RTT ≈ 0: 2·(N−1) per key.`,
    table(
      ['run', 'keys', 'sync s', 'Redis µs per key', 'process µs per key', 'Redis × INCRBY floor', 'over the limit'],
      rows,
      ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
    ),
  ]
  const one = find(results, 'one-redis', 'next')
  const cluster = find(results, 'cluster', 'next')
  if (one && cluster) {
    parts.push(
      `The Cluster's sync took ${ratio(cluster.seconds / one.seconds)} the time of one Redis's, its busiest master ${ratio(cluster.redisCpuUs / one.redisCpuUs)} one Redis's CPU. The syncing process, whose sync runs on one thread, used ${decimal(cluster.processCpuUs / 1e6, 2)} s of CPU over it, ${ratio(cluster.processCpuUs / 1e6 / one.seconds)} one Redis's sync time: a time more masters do not shorten. On ${results.machine.cpus} CPUs, three masters and the syncing process share the cores, so the time is bound by the machine as much as by the masters.`,
    )
  }
  return parts.join('\n\n')
}

/** The fleet's stated bound, in units over the limit summed over its keys (one window each): 2·(N−1) per key. */
function boundOf(cell: HybridSyncCell): number {
  return 2 * (cell.processes - 1) * (cell.keys / cell.processes)
}

/** docs/hybrid.md's capacity, as the bench measured it: a Markdown list, written between markers there. */
export function capacityMarkdown(results: BenchResults): string | undefined {
  const one = find(results, 'one-redis', 'next')
  const cluster = find(results, 'cluster', 'next')
  if (!one || !cluster) return undefined
  const a = capacityOf(one)
  const b = capacityOf(cluster)
  const date = results.startedAt.slice(0, 10)
  return [
    `Measured by \`${results.command}\` (${date}, ${results.machine.cpus} CPUs, Redis ${results.machine.redis}, ${integer(one.keys)} keys of one window; bench/results/latest.md, section 10), at the default \`syncIntervalMs\` of ${integer(DEFAULT_INTERVAL_MS)} ms:`,
    '',
    `- **One Redis** holds about **${integer(a.redis)} active keys per second** of syncs at its whole CPU (${decimal(redisPerKey(one), 2)} µs per key); one syncing process about ${integer(a.process)} at its whole CPU (${decimal(processPerKey(one), 2)} µs per key). The process and Redis sharing this machine, one sync carried ${integer(a.measured)} keys per second.`,
    `- **One Cluster master** holds about **${integer(b.redis)} active keys per second** (${decimal(redisPerKey(cluster), 2)} µs per key of its share); a Cluster of M masters about M times that, its chunks going to the masters at once. On this machine the ${cluster.masters}-master Cluster's sync carried ${integer(b.measured)} keys per second.`,
  ].join('\n')
}

export function hybridSyncTargets(results: BenchResults): TargetRow[] {
  const one = find(results, 'one-redis', 'next')
  const floor = find(results, 'floor-incrby')
  const cluster = find(results, 'cluster', 'next')
  if (!one) return []
  const rows: TargetRow[] = [
    {
      headline: `A HybridStore's sync costs Redis ≤ ${SYNC_REDIS_US} µs per key`,
      target: `a HybridStore's sync costs Redis ≤ ${SYNC_REDIS_US} µs per key (${integer(one.keys)} keys, a sync after the first)`,
      measured: `${decimal(redisPerKey(one), 2)} µs${floor ? `, ${ratio(redisPerKey(one) / redisPerKey(floor))} a pipelined INCRBY's ${decimal(redisPerKey(floor), 2)}` : ''} (section 10)`,
      ratio: SYNC_REDIS_US / redisPerKey(one),
      met: redisPerKey(one) <= SYNC_REDIS_US,
    },
    {
      target: `a HybridStore's sync costs its process ≤ ${SYNC_PROCESS_US} µs of CPU per key`,
      measured: `${decimal(processPerKey(one), 2)} µs (section 10)`,
      ratio: SYNC_PROCESS_US / processPerKey(one),
      met: processPerKey(one) <= SYNC_PROCESS_US,
    },
  ]
  if (cluster) {
    const share = cluster.seconds / one.seconds
    rows.push({
      target: `${integer(cluster.keys)} keys sync on a ${cluster.masters}-master Cluster in ≤ 1/3 of one Redis's time`,
      measured: `${decimal(cluster.seconds, 2)} s against ${decimal(one.seconds, 2)} s (${ratio(share)}; busiest master's CPU ${ratio(cluster.redisCpuUs / one.redisCpuUs)} one Redis's) (section 10)`,
      ratio: CLUSTER_SHARE / share,
      met: share <= CLUSTER_SHARE,
    })
  }
  return rows
}
