// How Tollgate's key layout spreads one rule over a Redis Cluster, and what a decision whose
// identifiers live in different slots costs. Prints Markdown tables; run with `pnpm --filter @tollgate/bench hot-shard`.
import { createLimiter, type DecisionReason, type Limiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { type Cluster, Redis } from 'ioredis'
import {
  clusterClient,
  clusterMasters,
  masterOfSlot,
  spawnRedisCluster,
  waitReady,
} from '../../test/src/redis-cluster.js'
import { keysWithTtl } from '../../test/src/redis-keys.js'

const DECISIONS = 30_000
const IDENTIFIERS = 10_000
const IN_FLIGHT = 256
const DURATION_MS = 3_000
// Decisions queue behind 256 in flight; a timeout here would be counted as a fast failure.
const STORE_TIMEOUT_MS = 10_000

const ips = Array.from({ length: IDENTIFIERS }, (_, i) => `ip:10.0.${i >> 8}.${i & 255}`)
const users = Array.from({ length: IDENTIFIERS / 2 }, (_, i) => `user:${i}`)
const rules = {
  api: { windows: [{ limit: 1_000_000, period: '1h' }] },
  tight: { windows: [{ limit: 1, period: '1h' }] },
} satisfies RulesOptions

interface Run {
  perSecond: number
  p50Ms: number
  p99Ms: number
  reasons: Map<DecisionReason, number>
  /** This process's CPU per decision, in microseconds: ioredis, the limiter and the driver. */
  clientCpuUs: number
  /** Server CPU per decision, all nodes together, in microseconds. */
  serverCpuUs: number
  /** The busiest node's part of that CPU. */
  busiestShare: number
}

/** `IN_FLIGHT` callers, each awaiting its previous decision, for `count` decisions or `DURATION_MS`. */
async function drive(
  limiter: Limiter,
  nodes: readonly Redis[],
  rule: string,
  identifiersOf: (i: number) => string[],
  count = Number.POSITIVE_INFINITY,
): Promise<Run> {
  const cpuBefore = await Promise.all(nodes.map(cpuSeconds))
  const clientBefore = process.cpuUsage()
  const latencies: number[] = []
  const reasons = new Map<DecisionReason, number>()
  let issued = 0
  const start = performance.now()
  const deadline = count === Number.POSITIVE_INFINITY ? start + DURATION_MS : Number.POSITIVE_INFINITY
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (issued < count && performance.now() < deadline) {
        const identifiers = identifiersOf(issued++)
        const started = performance.now()
        const { reason } = await limiter.consume(rule, identifiers)
        latencies.push(performance.now() - started)
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
      }
    }),
  )
  const seconds = (performance.now() - start) / 1000
  const ownCpu = process.cpuUsage(clientBefore)
  const cpu = (await Promise.all(nodes.map(cpuSeconds))).map((after, n) => after - (cpuBefore[n] as number))
  const totalCpu = cpu.reduce((sum, s) => sum + s, 0)
  latencies.sort((a, b) => a - b)
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? Number.NaN
  return {
    perSecond: latencies.length / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    reasons,
    clientCpuUs: (ownCpu.user + ownCpu.system) / latencies.length,
    serverCpuUs: (totalCpu * 1e6) / latencies.length,
    busiestShare: Math.max(...cpu) / totalCpu,
  }
}

async function cpuSeconds(node: Redis): Promise<number> {
  const info = await node.info('cpu')
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1])
  return field('used_cpu_user') + field('used_cpu_sys')
}

function limiterOn(client: Cluster | Redis, prefix: string): Limiter {
  return createLimiter({
    store: new RedisStore({ client, prefix }),
    rules,
    storeTimeoutMs: STORE_TIMEOUT_MS,
    onStoreError: 'deny',
  })
}

function percent(part: number, whole: number): string {
  return `${((100 * part) / whole).toFixed(1)}%`
}

function reasonsOf(run: Run): string {
  return [...run.reasons].map(([reason, n]) => `${reason} ${n}`).join(', ')
}

async function evalshaCalls(admin: Redis): Promise<number> {
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0)
}

/** The IP identifiers whose keys under `prefix` fall in slots that the master `admin` serves. */
async function identifiersServedBy(admin: Redis, prefix: string): Promise<string[]> {
  const store = new RedisStore({ client, prefix })
  const port = admin.options.port
  // CLUSTER SLOTS: [first, last, [host, port, id], ...replicas] per range.
  const served = (await admin.cluster('SLOTS')).filter(([, , master]) => master?.[1] === port)
  const slots = await Promise.all(
    ips.map((identifier) =>
      admin.cluster('KEYSLOT', store.keyOf({ rule: 'api', algorithm: 'sliding-log', windows: [], identifier })),
    ),
  )
  return ips.filter((_, i) =>
    served.some(([first, last]) => (slots[i] as number) >= first && (slots[i] as number) <= last),
  )
}

const cluster = await spawnRedisCluster({ masters: 3 })
const server = await spawnRedisServer()
const client = clusterClient(cluster)
const standalone = new Redis(server.url)
const masters = await clusterMasters(cluster)
const admins = masters.map((master) => new Redis(master.url))
try {
  await waitReady(client)

  // Spread: one rule, 30,000 decisions over 10,000 identifiers. 64 decisions under another
  // prefix first load the script on every master, so NOSCRIPT fallbacks stay out of the counts.
  const spread = limiterOn(client, 'spread:')
  await drive(limiterOn(client, 'warm:'), admins, 'api', (i) => [`ip:192.0.2.${i}`], 64)
  await Promise.all(admins.map((admin) => admin.config('RESETSTAT')))
  const spreadRun = await drive(spread, admins, 'api', (i) => [ips[i % IDENTIFIERS] as string], DECISIONS)
  const keys = await Promise.all(admins.map((admin) => keysWithTtl(admin, 'spread:')))
  const calls = await Promise.all(admins.map(evalshaCalls))
  const totalKeys = keys.reduce((sum, k) => sum + k.length, 0)
  const totalCalls = calls.reduce((sum, n) => sum + n, 0)
  const ruleTagSlot = Number(await (admins[0] as Redis).cluster('KEYSLOT', 'spread:{api}:ip:10.0.0.0:sl'))
  const ruleTagOwner = (await masterOfSlot(cluster, ruleTagSlot)).port

  console.log(
    `Node ${process.version}, redis-server 3-master Cluster on 127.0.0.1 (no replicas), ` +
      `${IN_FLIGHT} decisions in flight, one ioredis Cluster client in one process`,
  )
  console.log(
    `\n${DECISIONS.toLocaleString('en')} decisions over ${IDENTIFIERS.toLocaleString('en')} identifiers, ` +
      `one rule (${reasonsOf(spreadRun)}); keys without TTL: ${keys.flat().filter((k) => k.ttlMs <= 0).length}`,
  )
  console.log(
    '\n| master | keys, identifier as hash tag | EVALSHA calls, identifier as hash tag | keys and calls, rule as hash tag |',
  )
  console.log('|---|---|---|---|')
  masters.forEach((master, m) => {
    const k = keys[m]?.length ?? 0
    const c = calls[m] ?? 0
    console.log(
      `| ${master.port} | ${k} (${percent(k, totalKeys)}) | ${c} (${percent(c, totalCalls)}) | ` +
        `${master.port === ruleTagOwner ? '100%' : '0%'} |`,
    )
  })
  console.log(`\n(rule as hash tag: every key of the rule would be in slot ${ruleTagSlot}, served by ${ruleTagOwner}.)`)

  // Throughput, each for DURATION_MS.
  const onOneMaster = await identifiersServedBy(admins[0] as Redis, 'one:')
  const tight = limiterOn(client, 'undo:')
  // Every user has spent its 1 per hour: each decision below is refused on the user's slot, and
  // the address's slot is undone (when its slot is the lower, charged first) or peeked at.
  await drive(tight, admins, 'tight', (i) => [users[i] as string], users.length)
  const standaloneLimiter = limiterOn(standalone, 'alone:')
  await drive(standaloneLimiter, [standalone], 'api', (i) => [`ip:192.0.2.${i}`], 64)

  const runs: Array<[string, Run]> = [
    [
      'Cluster, 1 identifier, spread over 3 masters',
      await drive(spread, admins, 'api', (i) => [ips[i % IDENTIFIERS] as string]),
    ],
    [
      `Cluster, 1 identifier, all ${onOneMaster.length} identifiers on one master`,
      await drive(limiterOn(client, 'one:'), admins, 'api', (i) => [onOneMaster[i % onOneMaster.length] as string]),
    ],
    [
      'Cluster, 2 identifiers in 2 slots, admitted',
      await drive(spread, admins, 'api', (i) => [ips[i % IDENTIFIERS] as string, users[i % users.length] as string]),
    ],
    [
      'Cluster, 2 identifiers in 2 slots, refused by one (undo or peek)',
      await drive(tight, admins, 'tight', (i) => [ips[i % IDENTIFIERS] as string, users[i % users.length] as string]),
    ],
    [
      'standalone, 1 identifier',
      await drive(standaloneLimiter, [standalone], 'api', (i) => [ips[i % IDENTIFIERS] as string]),
    ],
    [
      'standalone, 2 identifiers (one script)',
      await drive(standaloneLimiter, [standalone], 'api', (i) => [
        ips[i % IDENTIFIERS] as string,
        users[i % users.length] as string,
      ]),
    ],
  ]
  console.log(
    `\n| decision, ${IN_FLIGHT} in flight, ${DURATION_MS / 1000} s | decisions/s | p50 ms | p99 ms | ` +
      "Node CPU µs/decision | Redis CPU µs/decision | busiest node's Redis CPU | reasons |",
  )
  console.log('|---|---|---|---|---|---|---|---|')
  for (const [name, run] of runs) {
    console.log(
      `| ${name} | ${Math.round(run.perSecond)} | ${run.p50Ms.toFixed(1)} | ${run.p99Ms.toFixed(1)} | ` +
        `${run.clientCpuUs.toFixed(0)} | ${run.serverCpuUs.toFixed(0)} | ${percent(run.busiestShare, 1)} | ` +
        `${reasonsOf(run)} |`,
    )
  }
} finally {
  for (const admin of admins) admin.disconnect()
  standalone.disconnect()
  client.disconnect()
  await Promise.all([cluster.stop(), server.stop()])
}
