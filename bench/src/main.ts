import { readFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'
import { configOf } from './config.js'
import { describeMachine } from './machine.js'
import { allocationUnits, measureAllocation } from './measures/allocation.js'
import { bytesUnits, measureBytes } from './measures/bytes.js'
import type { MeasureContext } from './measures/context.js'
import { decisionUnits, measureDecisions } from './measures/decisions.js'
import { exactnessUnits, measureExactness } from './measures/exactness.js'
import { httpUnits, measureHttp } from './measures/http.js'
import { hybridSyncUnits, measureHybridSync } from './measures/hybrid-sync.js'
import { latencyUnits, measureLatency } from './measures/latency.js'
import { liveRulesUnits, measureLiveRules } from './measures/live-rules.js'
import { measureMetricsCost, metricsCostUnits } from './measures/metrics-cost.js'
import { measureRedisBenchmark, redisBenchmarkUnits } from './measures/redis-benchmark.js'
import { commandUnits, measureCommands } from './measures/redis-commands.js'
import { measureRuleOptions, ruleOptionsUnits } from './measures/rule-options.js'
import { Progress } from './progress.js'
import { redisVersion } from './redis-info.js'
import { writeReport } from './report/write.js'
import { type BenchResults, MEASURES, type MeasureName, RESULT_KEY } from './results.js'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    from: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
})

if (values.help) {
  process.stdout.write(`pnpm bench [--quick] [--only ${MEASURES.join(',')}] [--from results/raw/<run>.json]

Starts its own redis-server on a free 127.0.0.1 port and measures Tollgate against the
incumbents in one run. Results: bench/results/latest.md and *.svg (--quick or --only:
bench/results/raw/quick/), raw JSON in bench/results/raw/. --from writes the report of a
saved run again, measuring nothing.
`)
  process.exit(0)
}

if (values.from !== undefined) {
  // pnpm runs the script in bench/; INIT_CWD is where the command was typed.
  const file = resolve(process.env.INIT_CWD ?? process.cwd(), values.from)
  const saved = JSON.parse(await readFile(file, 'utf8')) as BenchResults
  // A run saved before a measure existed holds no cells for it.
  for (const name of MEASURES) saved[RESULT_KEY[name]] ??= []
  const partial = MEASURES.some((name) => saved[RESULT_KEY[name]].length === 0)
  const written = await writeReport(saved, { partial, keepRaw: true })
  process.stdout.write(`${written.markdown}\n`)
  process.stderr.write(`\nWrote ${written.files.join(', ')}\n`)
  process.exit(0)
}

const only = new Set<MeasureName>(
  values.only === undefined ? MEASURES : (values.only.split(',').map((name) => name.trim()) as MeasureName[]),
)
for (const name of only)
  if (!MEASURES.includes(name)) throw new Error(`--only: unknown measure ${name}; known: ${MEASURES.join(', ')}`)

const config = configOf(values.quick)
const startLoad = loadavg()[0] as number
const startedAt = new Date()
const started = performance.now()
const units = {
  decisions: decisionUnits(config),
  latency: latencyUnits(config),
  commands: commandUnits(config),
  http: httpUnits(config),
  bytes: bytesUnits(config),
  exactness: exactnessUnits(config),
  'redis-benchmark': redisBenchmarkUnits(config),
  'live-rules': liveRulesUnits(config),
  metrics: metricsCostUnits(config),
  allocation: allocationUnits(config),
  'hybrid-sync': hybridSyncUnits(config),
  'rule-options': ruleOptionsUnits(config),
} satisfies Record<MeasureName, number>
const progress = new Progress([...only].reduce((sum, name) => sum + units[name], 0))

const server = await spawnRedisServer()
const client = new Redis(server.url)
const admin = new Redis(server.url)
try {
  await Promise.all([client.ping(), admin.ping()])
  const redis = await redisVersion(admin)
  progress.log(
    `redis-server ${redis} on ${server.url}; Node ${process.version}; ${values.quick ? 'quick' : 'full'} run`,
  )
  const context: MeasureContext = { config, redisUrl: server.url, client, admin, progress }
  const results: BenchResults = {
    command: `pnpm bench${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
    startedAt: startedAt.toISOString(),
    finishedAt: '',
    seconds: 0,
    config,
    machine: describeMachine(redis, startLoad),
    decisions: only.has('decisions') ? await measureDecisions(context) : [],
    latency: only.has('latency') ? await measureLatency(context) : [],
    commands: only.has('commands') ? await measureCommands(context) : [],
    bytes: only.has('bytes') ? await measureBytes(context) : [],
    exactness: only.has('exactness') ? await measureExactness(context) : [],
    redisBenchmark: only.has('redis-benchmark') ? await measureRedisBenchmark(context) : [],
    http: only.has('http') ? await measureHttp(context) : [],
    liveRules: only.has('live-rules') ? await measureLiveRules(context) : [],
    metrics: only.has('metrics') ? await measureMetricsCost(context) : [],
    allocation: only.has('allocation') ? await measureAllocation(context) : [],
    hybridSync: only.has('hybrid-sync') ? await measureHybridSync(context) : [],
    ruleOptions: only.has('rule-options') ? await measureRuleOptions(context) : [],
  }
  progress.stop()
  results.finishedAt = new Date().toISOString()
  results.seconds = (performance.now() - started) / 1000
  results.machine = describeMachine(redis, startLoad)
  const written = await writeReport(results, { partial: only.size < MEASURES.length, keepRaw: false })
  process.stdout.write(`${written.markdown}\n`)
  process.stderr.write(`\nWrote ${written.files.join(', ')}\n`)
} finally {
  progress.stop()
  client.disconnect()
  admin.disconnect()
  await server.stop()
}
