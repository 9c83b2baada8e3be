import { setTimeout as delay } from 'node:timers/promises'
import { createLimiter, LiveRules, type RulesOptions } from '@tollgate/core'
import { LineChild } from '../child-process.js'
import type { BenchConfig } from '../config.js'
import { commandStats } from '../redis-info.js'
import { median } from '../stats.js'
import type { MeasureContext } from './context.js'

export const LIVE_RULES_DEFAULTS = {
  api: { algorithm: 'fixed-window', windows: [{ limit: 1_000_000_000, period: '1m' }] },
} satisfies RulesOptions

export interface PropagationCell {
  kind: 'propagation'
  /** `nudge`: processes hear publishes on Pub/Sub; `poll`: nudges off, each process polls. */
  mode: 'nudge' | 'poll'
  processes: number
  pollIntervalMs: number
  publishes: number
  /** Per publish and process: ms from `publish()` called to that process applying the epoch. */
  propagationMs: number[]
  /** A PING's round trip on the publisher's connection, median of 50, ms: the unit propagation is counted in. */
  roundTripMs: number
}

export interface DecisionCommandsCell {
  kind: 'decision-commands'
  decisions: number
  seconds: number
  pollIntervalMs: number
  /** Commands Redis ran while the decisions ran, by name: every one of them the live rules'. */
  byCommand: Record<string, number>
}

export type LiveRulesCell = PropagationCell | DecisionCommandsCell

export function liveRulesUnits(_config: BenchConfig): number {
  return 3
}

/**
 * Measure 7: how fast a publish reaches a fleet of processes, each a child with its own
 * LiveRules, with nudges and with polling alone; and what live rules cost decisions in Redis
 * commands (INFO commandstats around decisions on an in-process store, so that every command
 * counted is the live rules').
 */
export async function measureLiveRules(context: MeasureContext): Promise<LiveRulesCell[]> {
  const { config, progress } = context
  const phase = progress.phase('live rules', liveRulesUnits(config))
  const cells: LiveRulesCell[] = []
  for (const mode of ['nudge', 'poll'] as const) {
    phase.note(`propagation, ${mode}`)
    cells.push(await measurePropagation(context, mode))
    phase.tick()
  }
  phase.note('Redis commands per decision')
  cells.push(await measureDecisionCommands(context))
  phase.tick()
  phase.done()
  return cells
}

async function measurePropagation(context: MeasureContext, mode: 'nudge' | 'poll'): Promise<PropagationCell> {
  const { config, redisUrl, client, admin } = context
  const { processes, pollIntervalMs } = config.liveRules
  const publishes = mode === 'nudge' ? config.liveRules.nudgePublishes : config.liveRules.pollPublishes
  await admin.flushall()
  const prefix = `bench-live-${mode}:`
  const args = [redisUrl, prefix, mode, String(pollIntervalMs)]
  const workers = Array.from({ length: processes }, () => new LineChild('live-rules-worker.ts', args))
  const publisher = new LiveRules({ client, defaults: LIVE_RULES_DEFAULTS, prefix, pollIntervalMs: 0, nudges: false })
  const propagationMs: number[] = []
  let roundTripMs = Number.NaN
  try {
    await Promise.all(workers.map((worker) => worker.receive<{ ready: true }>()))
    if (mode === 'nudge') await untilSubscribed(context, `${prefix}{rules}:nudge`, processes)
    const pings: number[] = []
    for (let i = 0; i < 50; i++) {
      const sent = performance.now()
      await client.ping()
      pings.push(performance.now() - sent)
    }
    roundTripMs = median(pings)
    for (let i = 0; i < publishes; i++) {
      // Polling processes are at unrelated phases of their timers: a publish lands anywhere in them.
      if (mode === 'poll') await delay(Math.random() * pollIntervalMs)
      const publishedAt = performance.timeOrigin + performance.now()
      const { epoch } = await publisher.publish({
        api: { algorithm: 'fixed-window', windows: [{ limit: 1_000_000_000 - i, period: '1m' }] },
      })
      const applied = await Promise.all(workers.map((worker) => worker.receive<{ epoch: number; atMs: number }>()))
      for (const answer of applied) {
        if (answer.epoch !== epoch) throw new Error(`a process applied epoch ${answer.epoch}, not ${epoch}`)
        propagationMs.push(answer.atMs - publishedAt)
      }
    }
  } finally {
    await publisher.close()
    await Promise.all(workers.map((worker) => worker.close()))
    await admin.flushall()
  }
  return { kind: 'propagation', mode, processes, pollIntervalMs, publishes, propagationMs, roundTripMs }
}

async function untilSubscribed(context: MeasureContext, channel: string, count: number): Promise<void> {
  const deadline = performance.now() + 10_000
  for (;;) {
    const [, subscribers] = (await context.admin.pubsub('NUMSUB', channel)) as [string, number]
    if (subscribers >= count) return
    if (performance.now() > deadline) throw new Error(`${subscribers} of ${count} processes subscribed to ${channel}`)
    await delay(20)
  }
}

async function measureDecisionCommands(context: MeasureContext): Promise<DecisionCommandsCell> {
  const { config, client, admin } = context
  const { pollIntervalMs, commandSeconds } = config.liveRules
  await admin.flushall()
  const prefix = 'bench-live-commands:'
  const live = new LiveRules({ client, defaults: LIVE_RULES_DEFAULTS, prefix, pollIntervalMs })
  const limiter = createLimiter({ rules: live })
  try {
    // The subscription and the reads it starts belong to start-up, not to the decisions counted.
    await untilSubscribed(context, `${prefix}{rules}:nudge`, 1)
    await live.refresh()
    const ids = Array.from({ length: 10_000 }, (_, i) => `ip:10.0.${i >> 8}.${i & 255}`)
    for (let i = 0; i < 10_000; i++) await limiter.consume('api', ids[i] as string)
    await admin.config('RESETSTAT')
    const started = performance.now()
    const deadline = started + commandSeconds * 1000
    let decisions = 0
    // 256 callers, as the decisions measure runs, for a few poll intervals. An in-process
    // decision settles in microtasks alone: each caller lets the event loop turn every 64, as a
    // server's I/O would, or the poll's timer could not fire at all.
    await Promise.all(
      Array.from({ length: 256 }, async () => {
        for (let own = 1; performance.now() < deadline; own++) {
          await limiter.consume('api', ids[decisions++ % ids.length] as string)
          if (own % 64 === 0) await new Promise((resolve) => setImmediate(resolve))
        }
      }),
    )
    const seconds = (performance.now() - started) / 1000
    const byCommand: Record<string, number> = {}
    for (const [name, { calls }] of await commandStats(admin)) {
      if (!/^(info|config|flushall)/.test(name)) byCommand[name] = calls
    }
    return { kind: 'decision-commands', decisions, seconds, pollIntervalMs, byCommand }
  } finally {
    await limiter.close()
    await live.close()
    await admin.flushall()
  }
}
