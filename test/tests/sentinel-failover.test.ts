import { createLimiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  formatSummary,
  type LoadRun,
  lateBeyondLoopLag,
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
import { keysWithTtl } from '../src/redis-keys.js'
import { type SpawnedSentinel, sentinelClient, spawnRedisSentinel, waitForFailover } from '../src/redis-sentinel.js'

const STORE_TIMEOUT_MS = 100
// What a 2-core machine running three sentinels, two servers, the test and its 50 callers adds,
// besides the times the event loop is blocked outright, which are measured and added to it.
const LATENCY_BOUND_MS = STORE_TIMEOUT_MS + 250
const CALLERS = 50
const LIMIT = 100_000
const PREFIX = 'failover:'
const ANSWERS_AFTER_FAILOVER = 1_000

describe('RedisStore through Sentinel while the master is killed under load', () => {
  let setup: SpawnedSentinel | undefined
  beforeAll(async () => {
    setup = await spawnRedisSentinel()
  }, 30_000)
  afterAll(async () => {
    await setup?.stop()
  }, 20_000)

  it('decides throughout the failover, then decides for real on the promoted replica', async () => {
    if (setup === undefined) throw new Error('the sentinels did not start in beforeAll')
    const unhandled: unknown[] = []
    const recordUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', recordUnhandled)
    const client = sentinelClient(setup)
    let clientErrors = 0
    client.on('error', () => clientErrors++)
    const store = new RedisStore({ client, prefix: PREFIX })
    const limiter = createLimiter({
      store,
      // sliding-log counts exactly, so each identifier's use can be compared with its 'ok' decisions.
      rules: { api: { algorithm: 'sliding-log', windows: [{ limit: LIMIT, period: '1h' }] } },
      onStoreError: 'allow',
      storeTimeoutMs: STORE_TIMEOUT_MS,
    })
    let load: LoadRun | undefined
    let stalls: StallWatch | undefined
    try {
      await waitReady(client)
      // Identifiers change once the sentinels name the new master, so keys written from then on can
      // only be the new master's own, not ones it replicated before the failover.
      let phase = 'before'
      const run = startLoad({
        callers: CALLERS,
        decide: (caller) => limiter.consume('api', `ip:${phase}.${caller}`),
        maxDecisions: 300_000,
        maxDurationMs: 25_000,
      })
      load = run
      limiter.on('breaker', (change) => run.mark(`breaker ${change.state}`))
      const storeErrors: StoreErrorRecord[] = []
      limiter.on('store-error', (error) => storeErrors.push({ atMs: run.now(), message: error.message }))
      client.on('ready', () => run.mark('client ready'))
      const answeredSince = (fromMs: number) => run.samples.filter((s) => s.startMs >= fromMs && storeAnswered(s))
      await pollUntil('the load is answered by the first master', 5_000, async () =>
        answeredSince(0).length >= 300 ? { done: true, value: undefined } : { done: false, state: 'warming up' },
      )

      const previousMasterPort = setup.master.port
      const killedAt = run.mark('SIGKILL master')
      setup.master.kill('SIGKILL')
      const promoted = await waitForFailover(setup, previousMasterPort, 15_000)
      const switchedAt = run.mark(`sentinels name ${promoted.port}`)
      phase = 'after'
      // PINGs the new master on a connection of its own, to tell machine stalls from failover trouble.
      stalls = watchStalls(promoted.port, run.now)
      await pollUntil(`${ANSWERS_AFTER_FAILOVER} decisions answered by the new master`, 10_000, async () => {
        const answered = answeredSince(switchedAt).length
        return answered >= ANSWERS_AFTER_FAILOVER
          ? { done: true, value: undefined }
          : { done: false, state: `${answered} answered` }
      })
      const report = await run.stop()
      await stalls.stop()
      const story = timeline(report)
      const summary = summarize(report.samples)

      // The gap: from the first decision the store did not answer to the first it answered again.
      const afterKill = report.samples.filter((s) => s.startMs >= killedAt)
      const gapStart = Math.min(...afterKill.filter((s) => !storeAnswered(s)).map((s) => s.startMs))
      const gapEnd = Math.min(...afterKill.filter((s) => storeAnswered(s)).map((s) => s.endMs))
      const fallbacks = report.samples.filter((s) => !storeAnswered(s))
      const readOnly = storeErrors.filter((e) => /READONLY/.test(e.message)).length
      const lateFallbacks = report.samples.filter((s) => s.startMs > gapEnd && !storeAnswered(s))
      const lateErrors = storeErrors.filter((e) => e.atMs > gapEnd)
      const unexplained = unexplainedByStalls(lateErrors, stalls, report, STORE_TIMEOUT_MS)
      console.log(
        `[sentinel-failover] master ${previousMasterPort} → ${promoted.port}: ` +
          `named after ${(switchedAt - killedAt).toFixed(0)}ms, gap=${(gapEnd - gapStart).toFixed(0)}ms ` +
          `(from +${(gapStart - killedAt).toFixed(0)}ms to +${(gapEnd - killedAt).toFixed(0)}ms after SIGKILL), ` +
          `fallbacks=${fallbacks.length} READONLY=${readOnly} ${formatSummary(summary)} client-errors=${clientErrors}` +
          ` after the gap: fallbacks=${lateFallbacks.length} store-errors=${lateErrors.length} ` +
          `(unexplained by stalls ${unexplained.length}, slowest ping ` +
          `${stalls.slowestPingWithin(gapEnd, Number.POSITIVE_INFINITY).toFixed(0)}ms) ` +
          `max event-loop lag=${maxLoopLag(report).toFixed(0)}ms`,
      )
      expect(promoted.port).toBe(setup.replica.port)
      expect(report.pending, `decisions still pending at the end (hung): ${story}`).toEqual([])
      expect(report.samples.filter((s) => s.decision === undefined).map((s) => String(s.thrown))).toEqual([])
      expect(
        lateBeyondLoopLag(report, LATENCY_BOUND_MS).map(
          (s) => `${s.latencyMs.toFixed(0)} ms at ${s.startMs.toFixed(0)} ms`,
        ),
        `decisions later than ${LATENCY_BOUND_MS} ms plus the time the event loop was blocked meanwhile: ${story}`,
      ).toEqual([])
      expect(summary.p99LatencyMs, 'p99 latency').toBeLessThanOrEqual(LATENCY_BOUND_MS)

      expect(Number.isFinite(gapStart) && Number.isFinite(gapEnd), `a gap, then answers: ${story}`).toBe(true)
      expect(gapEnd).toBeGreaterThan(gapStart)
      // READONLY from a demoted node, a closed connection, anything but a stall of the machine itself.
      expect(
        unexplained.map((e) => `${e.message} at ${e.atMs.toFixed(0)}ms`),
        `store errors after the gap ended that no stall explains: ${story}`,
      ).toEqual([])
      if (lateErrors.length === 0) expect(lateFallbacks.length, `fallbacks after the gap: ${story}`).toBe(0)
      expect(
        report.samples.filter((s) => s.startMs > gapEnd && storeAnswered(s)).every((s) => reasonOf(s) === 'ok'),
      ).toBe(true)

      // Every 'after' decision the store answered was counted on the promoted replica; one that timed
      // out may have been counted too (the command still ran), but none counted twice.
      const uses = await Promise.all(
        Array.from({ length: CALLERS }, async (_, caller) => {
          const identifier = `ip:after.${caller}`
          const mine = report.samples.filter((s) => s.caller === caller && s.startMs >= switchedAt)
          const peeked = await limiter.peek('api', identifier)
          return {
            caller,
            key: store.keyOf({
              rule: limiter.rules.get('api')!.stateName,
              algorithm: 'sliding-log',
              windows: [],
              identifier,
            }),
            ok: mine.filter((s) => reasonOf(s) === 'ok').length,
            fallbacks: mine.filter((s) => !storeAnswered(s)).length,
            used: LIMIT - (peeked.windows[0]?.remaining ?? LIMIT),
            peekReason: peeked.reason,
          }
        }),
      )
      for (const use of uses) {
        expect(use.peekReason).toBe('ok')
        expect(use.used, `caller ${use.caller}`).toBeGreaterThanOrEqual(use.ok)
        expect(use.used, `caller ${use.caller}`).toBeLessThanOrEqual(use.ok + use.fallbacks)
      }
      const chargedThoughFallback = uses.reduce((sum, use) => sum + use.used - use.ok, 0)
      console.log(`[sentinel-failover] charged on the new master though answered by fallback: ${chargedThoughFallback}`)

      const direct = new Redis({ host: promoted.host, port: promoted.port, lazyConnect: true })
      try {
        await direct.connect()
        expect((await direct.info('replication')).match(/^role:(\w+)/m)?.[1]).toBe('master')
        const keys = await keysWithTtl(direct, PREFIX)
        expect(keys.filter((k) => k.ttlMs <= 0)).toEqual([])
        const keyNames = new Set(keys.map((k) => k.key))
        expect(uses.filter((use) => use.ok > 0 && !keyNames.has(use.key)).map((use) => use.key)).toEqual([])
        expect(uses.filter((use) => use.ok > 0).length).toBe(CALLERS)
      } finally {
        direct.disconnect()
      }
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', recordUnhandled)
      await load?.stop(0)
      await stalls?.stop()
      await limiter.close()
      await client.quit().catch(() => client.disconnect())
    }
  }, 30_000)
})
