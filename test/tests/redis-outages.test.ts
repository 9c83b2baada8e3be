import { setTimeout as delay } from 'node:timers/promises'
import { type BreakerState, createLimiter, type Limiter, RedisStore, type RulesOptions } from '@tollgate/core'
import { Redis, type RedisOptions } from 'ioredis'
import { createClient } from 'redis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  formatSummary,
  type LoadReport,
  type LoadRun,
  lateBeyondLoopLag,
  loopBlockedWithin,
  maxLoopLag,
  reasonOf,
  startLoad,
  storeAnswered,
  summarize,
  timeline,
} from '../src/load-driver.js'
import { type StallWatch, type StoreErrorRecord, unexplainedByStalls, watchStalls } from '../src/load-stall-watch.js'
import { pollUntil } from '../src/poll.js'
import { waitReady } from '../src/redis-cluster.js'
import { withNode } from '../src/redis-one-off-connection.js'
import { type SpawnedRedis, spawnRedisServer } from '../src/redis-server.js'

const STORE_TIMEOUT_MS = 100
const PROBE_AFTER_MS = 500
// What a 2-core machine running Redis, the test and its 50 callers adds to a decision's own bound,
// besides the times the event loop is blocked outright, which are measured and added to it.
const LATENCY_SLACK_MS = 250
const LATENCY_BOUND_MS = STORE_TIMEOUT_MS + LATENCY_SLACK_MS
const RECOVERY_BOUND_MS = 1_500
const OUTAGE_MS = 3_000
const CALLERS = 50
const LOCAL_LIMIT = 20
const WARM_UP_DECISIONS = 300
const DECISIONS_AFTER_RECOVERY = 500

// One limiter, one breaker, the three failure policies side by side: 'allow' and 'deny' set per
// rule, 'local' inherited from the limiter. `login` is tight so that the local store must refuse.
const rules: RulesOptions = {
  open: { onStoreError: 'allow', windows: [{ limit: 1_000_000, period: '1m' }] },
  closed: { onStoreError: 'deny', windows: [{ limit: 1_000_000, period: '1m' }] },
  login: { windows: [{ limit: LOCAL_LIMIT, period: '1m' }] },
}
const RULE_CYCLE = ['open', 'closed', 'login'] as const
const FALLBACK_REASON = { open: 'store-error-allowed', closed: 'store-error-denied', login: 'local-fallback' } as const
/**
 * `login` is over its limit before the outage: Redis's refusal, held in the process until the
 * minute ends, keeps refusing it through the outage (the refusal cache), as Redis would have.
 */
const HELD_REFUSAL = { rule: 'login', reason: 'limited' } as const

/** A connected client of the store under test, how it reports errors, and how it is closed. */
interface OutageClient {
  readonly client: ConstructorParameters<typeof RedisStore>[0]['client']
  onError(listener: () => void): void
  quit(): Promise<unknown>
  disconnect(): void
}

const ioredis =
  (options: RedisOptions) =>
  async (url: string): Promise<OutageClient> => {
    const client = new Redis(url, options)
    await waitReady(client)
    return {
      client,
      onError: (listener) => client.on('error', listener),
      quit: () => client.quit(),
      disconnect: () => client.disconnect(),
    }
  }

// node-redis queues commands while it reconnects and never sends one again: the store's bound
// and the breaker must hold there as with ioredis.
const nodeRedis = async (url: string): Promise<OutageClient> => {
  const client = createClient({ url })
  const errors: Array<() => void> = []
  client.on('error', () => {
    for (const listener of errors) listener()
  })
  await client.connect()
  return {
    client,
    onError: (listener) => errors.push(listener),
    quit: () => client.close(),
    disconnect: () => client.destroy(),
  }
}

const clients: ReadonlyArray<{ name: string; connect: (url: string) => Promise<OutageClient> }> = [
  { name: 'ioredis defaults', connect: ioredis({}) },
  { name: 'fail-fast ioredis', connect: ioredis({ maxRetriesPerRequest: 0, enableOfflineQueue: false }) },
  { name: 'node-redis defaults', connect: nodeRedis },
]

interface Outage {
  /** On the load's timeline: when Redis stopped answering and when it was given back. */
  startMs: number
  endMs: number
}

interface Scenario {
  server: SpawnedRedis
  client: OutageClient
  limiter: Limiter
  load: LoadRun
  breaker: Array<{ state: BreakerState; atMs: number }>
  storeErrors: StoreErrorRecord[]
  /** PINGs the same server on a connection of its own, to tell machine stalls from outages. */
  stalls: StallWatch
  clientErrors: number
}

const started: Array<() => Promise<unknown>> = []
const unhandled: unknown[] = []
const recordUnhandled = (reason: unknown) => unhandled.push(reason)

beforeEach(() => {
  unhandled.length = 0
  process.on('unhandledRejection', recordUnhandled)
})

afterEach(async () => {
  process.off('unhandledRejection', recordUnhandled)
  // Whatever a failed test left running, newest first: load, limiter, client, servers.
  for (const stop of started.splice(0).reverse()) await stop().catch(() => {})
})

async function startScenario(connect: (url: string) => Promise<OutageClient>): Promise<Scenario> {
  const server = await spawnRedisServer()
  started.push(() => server.stop())
  const client = await connect(server.url)
  started.push(async () => client.disconnect())
  let clientErrors = 0
  // A production client logs these; here they are counted, and must not crash anything.
  client.onError(() => clientErrors++)
  const limiter = createLimiter({
    store: new RedisStore({ client: client.client, prefix: 'outage:' }),
    rules,
    onStoreError: 'local',
    storeTimeoutMs: STORE_TIMEOUT_MS,
    breaker: { failureThreshold: 3, probeAfterMs: PROBE_AFTER_MS },
  })
  started.push(() => limiter.close())
  const load = startLoad({
    callers: CALLERS,
    decide: (caller, iteration) => {
      const rule = RULE_CYCLE[(caller + iteration) % RULE_CYCLE.length]!
      return limiter.consume(rule, rule === 'login' ? 'user:42' : `ip:10.0.0.${caller}`)
    },
    maxDecisions: 200_000,
    maxDurationMs: 20_000,
  })
  started.push(() => load.stop(0))
  const stalls = watchStalls(server.port, load.now)
  started.push(() => stalls.stop())
  const breaker: Scenario['breaker'] = []
  limiter.on('breaker', (change) => breaker.push({ state: change.state, atMs: load.mark(`breaker ${change.state}`) }))
  const storeErrors: StoreErrorRecord[] = []
  limiter.on('store-error', (error) => storeErrors.push({ atMs: load.now(), message: error.message }))
  await waitForAnswers(load, 0, WARM_UP_DECISIONS)
  return {
    server,
    client,
    limiter,
    load,
    breaker,
    storeErrors,
    stalls,
    get clientErrors() {
      return clientErrors
    },
  }
}

function waitForAnswers(load: LoadRun, afterMs: number, count: number): Promise<void> {
  return pollUntil(`${count} decisions answered by Redis after ${afterMs.toFixed(0)} ms`, 10_000, async () => {
    const answered = load.samples.filter((s) => s.startMs >= afterMs && storeAnswered(s)).length
    if (answered >= count) return { done: true, value: undefined }
    const oldest = Math.min(load.now(), ...load.pending().map((p) => p.startMs))
    return {
      done: false,
      state: `${answered} answered; oldest decision in flight for ${(load.now() - oldest).toFixed(0)} ms`,
    }
  })
}

/**
 * Waits for the breaker to be closed and Redis to answer a steady stream again. A breaker that
 * never opened passes here too, so that checkOutage reports what went wrong with the timeline.
 */
async function waitForRecovery(scenario: Scenario): Promise<void> {
  await pollUntil('the breaker is closed after the outage', 10_000, async () =>
    scenario.limiter.breakerState === 'closed'
      ? { done: true, value: undefined }
      : { done: false, state: `breaker ${scenario.limiter.breakerState}` },
  )
  await waitForAnswers(scenario.load, scenario.load.now(), DECISIONS_AFTER_RECOVERY)
}

function resourceCounts(): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const resource of process.getActiveResourcesInfo()) counts[resource] = (counts[resource] ?? 0) + 1
  return counts
}

// Timers and sockets: what a limiter or client left behind would hold the process open with.
function leftBehind(baseline: Record<string, number>): string[] {
  const now = resourceCounts()
  return ['Timeout', 'TCPSocketWrap', 'TCPWrap'].filter((kind) => (now[kind] ?? 0) > (baseline[kind] ?? 0))
}

async function endScenario(scenario: Scenario, baseline: Record<string, number>): Promise<LoadReport> {
  const report = await scenario.load.stop()
  await scenario.stalls.stop()
  await scenario.limiter.close()
  await scenario.client.quit()
  await pollUntil('no timer or socket is left behind', 5_000, async () => {
    const left = leftBehind(baseline)
    return left.length === 0 ? { done: true, value: undefined } : { done: false, state: `left: ${left.join(', ')}` }
  })
  return report
}

/**
 * What every outage must show: no decision threw, hung or took longer than its bound; the
 * decisions made while Redis was gone took each rule's policy, and 'local' still refused past
 * the limit; the breaker opened and closed; Redis answered again within the recovery bound, and
 * kept answering, unless the machine itself stalled (a PING on another connection as slow).
 * The summary line is printed first, so that a failing run still records what it measured.
 */
function checkOutage(name: string, scenario: Scenario, report: LoadReport, outage: Outage): void {
  const story = timeline(report)
  const summary = summarize(report.samples)
  const changes = scenario.breaker.map((c) => `${c.state}@${c.atMs.toFixed(0)}`)
  const closedAt = scenario.breaker.find((c) => c.state === 'closed' && c.atMs >= outage.endMs)?.atMs
  const recoveredAt = Math.min(
    ...report.samples.filter((s) => s.startMs >= outage.endMs && storeAnswered(s)).map((s) => s.endMs),
  )
  const recoveredMs = recoveredAt - outage.endMs
  const breakerClosedMs = (closedAt ?? Number.POSITIVE_INFINITY) - outage.endMs
  const after = report.samples.filter((s) => s.startMs > recoveredAt)
  const fallbacksAfter = after.filter((s) => !storeAnswered(s))
  const errorsAfter = scenario.storeErrors.filter((e) => e.atMs > recoveredAt)
  const unexplained = unexplainedByStalls(errorsAfter, scenario.stalls, report, STORE_TIMEOUT_MS)
  const slowestPingAfter = scenario.stalls.slowestPingWithin(recoveredAt, Number.POSITIVE_INFINITY)
  console.log(
    `[redis-outages] ${name}: outage=${(outage.endMs - outage.startMs).toFixed(0)}ms ${formatSummary(summary)} ` +
      `recovered=+${recoveredMs.toFixed(0)}ms (breaker closed +${breakerClosedMs.toFixed(0)}ms) ` +
      `after recovery: fallbacks=${fallbacksAfter.length} store-errors=${errorsAfter.length} ` +
      `(unexplained by stalls ${unexplained.length}, slowest ping ${slowestPingAfter.toFixed(0)}ms) ` +
      `breaker=[${changes.join(' ')}] client-errors=${scenario.clientErrors} ` +
      `max event-loop lag=${maxLoopLag(report).toFixed(0)}ms`,
  )

  expect(report.pending, `decisions still pending at the end (hung): ${story}`).toEqual([])
  expect(
    report.samples.filter((s) => s.decision === undefined).map((s) => String(s.thrown)),
    'decisions that threw or rejected',
  ).toEqual([])
  expect(
    lateBeyondLoopLag(report, LATENCY_BOUND_MS).map(
      (s) => `${s.latencyMs.toFixed(0)} ms at ${s.startMs.toFixed(0)} ms`,
    ),
    `decisions later than ${LATENCY_BOUND_MS} ms plus the time the event loop was blocked meanwhile: ${story}`,
  ).toEqual([])
  expect(summary.p99LatencyMs, 'p99 latency').toBeLessThanOrEqual(LATENCY_BOUND_MS)
  expect(unhandled, 'unhandled rejections').toEqual([])

  const during = report.samples.filter((s) => s.startMs >= outage.startMs && s.endMs < outage.endMs)
  expect(during.length, 'decisions during the outage').toBeGreaterThan(1_000)
  const wrong = during.filter(
    (s) =>
      reasonOf(s) !== FALLBACK_REASON[s.decision?.rule as keyof typeof FALLBACK_REASON] &&
      !(s.decision?.rule === HELD_REFUSAL.rule && reasonOf(s) === HELD_REFUSAL.reason),
  )
  expect(
    wrong.slice(0, 5).map((s) => `${s.decision?.rule} ${reasonOf(s)} at ${s.startMs.toFixed(0)} ms`),
    `decisions during the outage that did not take their rule's policy: ${story}`,
  ).toEqual([])
  // The breaker stays open throughout (asserted below), so one in-process store decided them all.
  const local = during.filter((s) => reasonOf(s) === 'local-fallback')
  const localAllowed = local.filter((s) => s.decision?.allowed).length
  expect(localAllowed, "'local' admits no more than the limit while Redis is gone").toBeLessThanOrEqual(LOCAL_LIMIT)
  expect(local.length - localAllowed, "'local' refuses past the limit").toBeGreaterThan(0)
  const denied = during.filter((s) => s.decision?.rule === 'closed')
  expect(denied.every((s) => !s.decision?.allowed && (s.decision?.retryAfterMs ?? 0) > 0)).toBe(true)

  const opened = scenario.breaker.find((c) => c.state === 'open')
  expect(opened?.atMs, `the breaker opens during the outage: ${changes}`).toBeGreaterThanOrEqual(outage.startMs)
  expect(opened?.atMs).toBeLessThan(outage.endMs)
  expect(
    scenario.breaker.filter((c) => c.state === 'closed' && c.atMs < outage.endMs),
    'the breaker never closes while Redis is gone',
  ).toEqual([])
  expect(scenario.limiter.breakerState).toBe('closed')
  // Like a decision's latency, recovery is late by however long the event loop was blocked meanwhile.
  const recoveryBound = RECOVERY_BOUND_MS + loopBlockedWithin(report, outage.endMs, recoveredAt)
  expect(recoveredMs, `time to recover: ${story}`).toBeLessThanOrEqual(recoveryBound)
  expect(breakerClosedMs, `time to close the breaker: ${changes}`).toBeLessThanOrEqual(recoveryBound)

  // Once recovered, Redis answers every decision, and the generous rules pass.
  expect(
    unexplained.map((e) => `${e.message} at ${e.atMs.toFixed(0)} ms`),
    `store errors after recovery that no stall explains: ${story}`,
  ).toEqual([])
  if (errorsAfter.length === 0) expect(fallbacksAfter.length, `fallbacks after recovery: ${story}`).toBe(0)
  const answeredAfter = after.filter(storeAnswered)
  expect(answeredAfter.length).toBeGreaterThanOrEqual(DECISIONS_AFTER_RECOVERY)
  expect(answeredAfter.filter((s) => s.decision?.rule !== 'login').every((s) => reasonOf(s) === 'ok')).toBe(true)
}

describe.each(clients)('Redis outages under load, $name', ({ name, connect }) => {
  it('keeps deciding while Redis is paused (SIGSTOP) and recovers after SIGCONT', async () => {
    const baseline = resourceCounts()
    const scenario = await startScenario(connect)

    const startMs = scenario.load.mark('SIGSTOP')
    scenario.server.kill('SIGSTOP')
    // Real time is the subject: the outage lasts this long, and is measured below.
    await delay(OUTAGE_MS)
    scenario.server.kill('SIGCONT')
    const outage = { startMs, endMs: scenario.load.mark('SIGCONT') }
    await waitForRecovery(scenario)

    const report = await endScenario(scenario, baseline)
    checkOutage(`${name}, SIGSTOP`, scenario, report, outage)
  }, 30_000)

  it('keeps deciding while Redis is killed (SIGKILL), and recovers once it restarts on the same port', async () => {
    const baseline = resourceCounts()
    const scenario = await startScenario(connect)
    const { port } = scenario.server

    const startMs = scenario.load.mark('SIGKILL')
    scenario.server.kill('SIGKILL')
    await scenario.server.stop()
    await delay(OUTAGE_MS - (scenario.load.now() - startMs))
    // Measured from the restart's start: Redis's own start-up counts against recovery.
    const endMs = scenario.load.mark('restart')
    const restarted = await spawnRedisServer({ port })
    started.push(() => restarted.stop())
    scenario.load.mark('restarted')
    const outage = { startMs, endMs }
    await waitForRecovery(scenario)

    const report = await endScenario(scenario, baseline)
    checkOutage(`${name}, SIGKILL + restart`, scenario, report, outage)
    // The new server started with no scripts and decides anyway. ioredis sends a script as EVAL
    // the first time on each connection (EVALSHA after), so a restart does not even meet NOSCRIPT;
    // SCRIPT FLUSH on a live connection does (redis-round-trips.test.ts). node-redis meets it,
    // and sends the script as EVAL then.
    const stats = await withNode(
      port,
      async (admin) => `${await admin.info('commandstats')}${await admin.info('errorstats')}`,
    )
    console.log(
      `[redis-outages] ${name}, SIGKILL + restart: scripts on the new server: ` +
        `${/^cmdstat_eval:calls=\d+/m.exec(stats)?.[0]}, ${/^cmdstat_evalsha:calls=\d+/m.exec(stats)?.[0]}, ` +
        `NOSCRIPT=${/^errorstat_NOSCRIPT:count=(\d+)/m.exec(stats)?.[1] ?? 0}`,
    )
    expect(stats).toMatch(/^cmdstat_eval:calls=[1-9]/m)
  }, 30_000)
})
