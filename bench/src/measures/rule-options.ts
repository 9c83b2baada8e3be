import { createLimiter, MemoryStore, RedisStore, type RulesOptions, type WindowOptions } from '@tollgate/core'
import { type BenchConfig, LIMIT_NEVER_REACHED, PERIOD_MS } from '../config.js'
import type { Decider, StoreKind } from '../contenders/contender.js'
import { STORE_TIMEOUT_MS } from '../contenders/tollgate.js'
import { driveFor } from '../drive.js'
import { redisCpuSeconds } from '../redis-info.js'
import { rotate } from '../stats.js'
import { usersInOrgs } from '../workload.js'
import type { MeasureContext } from './context.js'
import { addRun, emptyTally, type RunTally } from './run-tally.js'

export const RULE_OPTION_CASES = ['one-rule', 'chain', 'hierarchy', 'block'] as const
export type RuleOptionsCase = (typeof RULE_OPTION_CASES)[number]

/** The case the others are compared with: what a decision on two identifiers costs with neither option. */
export const BASELINE_CASE: RuleOptionsCase = 'one-rule'

export const RULE_OPTION_STORES: readonly StoreKind[] = ['memory', 'redis']

const windows: WindowOptions[] = [{ limit: LIMIT_NEVER_REACHED, period: PERIOD_MS }]

/** Each case's rules, and the rule its decisions are asked of. */
const CASES: Readonly<Record<RuleOptionsCase, { label: string; rule: string; rules: RulesOptions }>> = {
  'one-rule': {
    label: 'one rule, 2 identifiers',
    rule: 'r',
    rules: { r: { algorithm: 'fixed-window', windows } },
  },
  chain: {
    label: '3-level chain without by',
    rule: 'user',
    rules: {
      user: { algorithm: 'fixed-window', windows, parent: 'org' },
      org: { algorithm: 'fixed-window', windows, parent: 'global' },
      global: { algorithm: 'fixed-window', windows },
    },
  },
  hierarchy: {
    label: '3-level hierarchy with by',
    rule: 'user',
    rules: {
      user: { algorithm: 'fixed-window', windows, by: ['user'], parent: 'org' },
      org: { algorithm: 'fixed-window', windows, by: ['org'], parent: 'global' },
      global: { algorithm: 'fixed-window', windows, by: [] },
    },
  },
  block: {
    label: 'one rule with block, 2 identifiers',
    rule: 'r',
    rules: { r: { algorithm: 'fixed-window', windows, block: { for: '15m' } } },
  },
}

export function ruleOptionsLabel(name: RuleOptionsCase): string {
  return CASES[name].label
}

export interface RuleOptionsCell extends RunTally {
  case: RuleOptionsCase
  store: StoreKind
  inFlight: number
  /** Rule × identifier pairs one decision checked and charged, read from a decision's windows (one window per rule). */
  targets: number
}

export function ruleOptionsUnits(config: BenchConfig): number {
  return RULE_OPTION_STORES.length * RULE_OPTION_CASES.length * (1 + config.ruleOptions.repetitions)
}

async function setUp(
  name: RuleOptionsCase,
  store: StoreKind,
  context: MeasureContext,
): Promise<{ decider: Decider; targets: number }> {
  const { rule, rules } = CASES[name]
  const limiter = createLimiter({
    store: store === 'redis' ? new RedisStore({ client: context.client }) : new MemoryStore(),
    rules,
    storeTimeoutMs: STORE_TIMEOUT_MS,
    onWarning: () => {},
  })
  const probe = await limiter.consume(rule, usersInOrgs()(0))
  if (probe.error) throw probe.error
  return {
    targets: new Set(probe.windows.map((window) => `${window.rule}\n${window.identifier}`)).size,
    decider: {
      async decide(identifiers) {
        const decision = await limiter.consume(rule, identifiers)
        if (decision.error) throw decision.error
        return decision.allowed
      },
      teardown: () => limiter.close(),
    },
  }
}

/**
 * Measure 11: what a rule's `by` and `block` add to a decision. Per store, each case's limiter
 * (fixed window, limits never reached, 10,000 users in 100 orgs) is set up and warmed up once,
 * then measured `repetitions` times in an order rotated each repetition, with Redis flushed
 * before each measurement, as in measure 1.
 */
export async function measureRuleOptions(context: MeasureContext): Promise<RuleOptionsCell[]> {
  const { config, admin, progress } = context
  const { warmupMs, measureMs, repetitions, inFlight } = config.ruleOptions
  const phase = progress.phase('rule options', ruleOptionsUnits(config))
  const ids = usersInOrgs()
  const cells: RuleOptionsCell[] = []
  for (const store of RULE_OPTION_STORES) {
    const deciders = new Map<RuleOptionsCase, Decider>()
    const byCase = new Map<RuleOptionsCase, RuleOptionsCell>()
    for (const name of RULE_OPTION_CASES) {
      const { decider, targets } = await setUp(name, store, context)
      deciders.set(name, decider)
      const cell: RuleOptionsCell = { case: name, store, inFlight, targets, ...emptyTally() }
      byCase.set(name, cell)
      cells.push(cell)
    }
    for (const name of RULE_OPTION_CASES) {
      phase.note(`warm-up ${CASES[name].label} (${store})`)
      await admin.flushall()
      await driveFor(deciders.get(name) as Decider, ids, inFlight, warmupMs)
      phase.tick()
    }
    for (let rep = 0; rep < repetitions; rep++) {
      for (const name of rotate(RULE_OPTION_CASES, rep)) {
        phase.note(`${CASES[name].label} (${store}) rep ${rep + 1}`)
        await admin.flushall()
        const redisBefore = await redisCpuSeconds(admin)
        const run = await driveFor(deciders.get(name) as Decider, ids, inFlight, measureMs)
        const redisUsed = (await redisCpuSeconds(admin)) - redisBefore
        addRun(byCase.get(name) as RuleOptionsCell, run, redisUsed)
        phase.tick()
      }
    }
    for (const decider of deciders.values()) await decider.teardown()
  }
  phase.done()
  return cells
}
