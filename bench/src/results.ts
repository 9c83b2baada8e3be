import type { BenchConfig } from './config.js'
import type { Machine } from './machine.js'
import type { AllocationCell } from './measures/allocation.js'
import type { BytesCell } from './measures/bytes.js'
import type { DecisionCell } from './measures/decisions.js'
import type { ExactnessCell } from './measures/exactness.js'
import type { HttpCell } from './measures/http.js'
import type { HybridSyncCell } from './measures/hybrid-sync.js'
import type { LatencyCell } from './measures/latency.js'
import type { LiveRulesCell } from './measures/live-rules.js'
import type { MetricsCostCell } from './measures/metrics-cost.js'
import type { RedisBenchmarkCell } from './measures/redis-benchmark.js'
import type { CommandCell } from './measures/redis-commands.js'
import type { RuleOptionsCell } from './measures/rule-options.js'

export interface BenchResults {
  command: string
  startedAt: string
  finishedAt: string
  seconds: number
  config: BenchConfig
  machine: Machine
  decisions: DecisionCell[]
  latency: LatencyCell[]
  commands: CommandCell[]
  http: HttpCell[]
  bytes: BytesCell[]
  exactness: ExactnessCell[]
  redisBenchmark: RedisBenchmarkCell[]
  liveRules: LiveRulesCell[]
  metrics: MetricsCostCell[]
  allocation: AllocationCell[]
  hybridSync: HybridSyncCell[]
  ruleOptions: RuleOptionsCell[]
}

export const MEASURES = [
  'decisions',
  'latency',
  'commands',
  'http',
  'bytes',
  'exactness',
  'redis-benchmark',
  'live-rules',
  'metrics',
  'allocation',
  'hybrid-sync',
  'rule-options',
] as const
export type MeasureName = (typeof MEASURES)[number]

/** Where each measure's cells are kept in the results. */
export const RESULT_KEY = {
  decisions: 'decisions',
  latency: 'latency',
  commands: 'commands',
  http: 'http',
  bytes: 'bytes',
  exactness: 'exactness',
  'redis-benchmark': 'redisBenchmark',
  'live-rules': 'liveRules',
  metrics: 'metrics',
  allocation: 'allocation',
  'hybrid-sync': 'hybridSync',
  'rule-options': 'ruleOptions',
} as const satisfies Record<MeasureName, keyof BenchResults>
