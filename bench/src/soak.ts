import { spawn } from 'node:child_process'
import { setTimeout as delay } from 'node:timers/promises'
import { createLimiter, type DecisionReason, RedisStore, type TollgateError } from '@tollgate/core'
import { spawnRedisServer } from '@tollgate/test-support/redis-server'
import { Redis } from 'ioredis'

/*
 * Mixed load against a Redis that is killed (SIGKILL) and restarted on the same port every
 * RESTART_EVERY_MS, to show that no decision ever throws and that memory stays flat.
 * `pnpm soak -- --seconds 60`. Exit code 1 when a decision threw or the heap grew.
 */

const REPORT_EVERY_MS = 5_000
const RESTART_EVERY_MS = 15_000
const DOWN_MS = 1_000
const WARM_UP_MS = 5_000
const CALLERS = 64
const IP_IDENTIFIERS = 8_000
const USER_IDENTIFIERS = 2_000
// Heap growth tolerated between warm-up and end, both measured idle after a forced GC.
const HEAP_SLACK_RATIO = 0.1
const HEAP_SLACK_BYTES = 5 * 2 ** 20

type Operation = 'consume' | 'peek' | 'refund'

interface Counts {
  decisions: number
  reasons: Map<DecisionReason, number>
  refunds: number
  /** Refunds are documented to reject with TG_STORE while the store is down; counted, not thrown. */
  refundStoreErrors: number
  thrown: number
  storeErrors: number
}

const gc = globalThis.gc
if (typeof gc !== 'function') {
  // The verdict needs a forced GC; re-run this same command under --expose-gc (tsx's loader flags are in execArgv).
  const child = spawn(process.execPath, ['--expose-gc', ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
  })
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
} else {
  process.exitCode = await soak(secondsOf(process.argv), gc)
}

async function soak(seconds: number, forceGc: () => void): Promise<number> {
  const durationMs = seconds * 1_000
  const start = process.memoryUsage()
  let redis = await spawnRedisServer()
  const { host, port } = redis

  const client = new Redis({ host, port })
  let connectionErrors = 0
  // Expected while the server is down; without a listener ioredis would crash the process.
  client.on('error', () => connectionErrors++)
  const limiter = createLimiter({
    store: new RedisStore({ client, prefix: 'soak:' }),
    rules: {
      api: { algorithm: 'token-bucket', windows: [{ limit: 2_000, period: '1m' }] },
      'api.read': {
        algorithm: 'sliding-window',
        windows: [
          { limit: 600, period: '1m' },
          { limit: 20, period: '1s' },
        ],
        parent: 'api',
      },
      'api.write': { algorithm: 'gcra', windows: [{ limit: 60, period: '1m' }], parent: 'api', onStoreError: 'local' },
      'auth.login': {
        algorithm: 'sliding-log',
        windows: [
          { limit: 20, period: '1m' },
          { limit: 5, period: '3s' },
        ],
        onStoreError: 'deny',
      },
      upload: { algorithm: 'fixed-window', windows: [{ limit: 10_000_000, period: '1m' }] },
    },
  })
  let interval = emptyCounts()
  const total = emptyCounts()
  limiter.on('store-error', () => interval.storeErrors++)
  const breakerChanges: string[] = []
  limiter.on('breaker', ({ state }) => breakerChanges.push(state))

  const ips = Array.from({ length: IP_IDENTIFIERS }, (_, i) => `ip:10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
  const users = Array.from({ length: USER_IDENTIFIERS }, (_, i) => `user:${i}`)
  const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)] as T

  let paused: Promise<void> | undefined
  let inFlight = 0
  let stopping = false

  async function call(): Promise<void> {
    const draw = Math.random()
    const operation: Operation = draw < 0.7 ? 'consume' : draw < 0.9 ? 'peek' : 'refund'
    const which = Math.random()
    const [rule, identifiers, cost]: [rule: 'api.read' | 'api.write' | 'auth.login' | 'upload', string[], number] =
      which < 0.4
        ? ['api.read', [pick(ips)], 1]
        : which < 0.6
          ? ['api.write', [pick(ips), pick(users)], 1]
          : which < 0.85
            ? ['auth.login', [pick(ips), pick(users)], 1]
            : ['upload', [pick(users)], 1 + Math.floor(Math.random() * 100_000)]
    const counts = interval
    try {
      const decision = await limiter[operation](rule, identifiers, { cost })
      counts.decisions++
      if (operation === 'refund') counts.refunds++
      else counts.reasons.set(decision.reason, (counts.reasons.get(decision.reason) ?? 0) + 1)
    } catch (error) {
      if (operation === 'refund' && (error as TollgateError).code === 'TG_STORE') counts.refundStoreErrors++
      else {
        counts.thrown++
        if (counts.thrown <= 3) console.error(`${operation} ${rule} threw:`, error)
      }
    }
  }

  async function caller(): Promise<void> {
    while (!stopping) {
      if (paused) await paused
      if (stopping) break
      inFlight++
      await call()
      inFlight--
      // Requests arrive through I/O: without this, decisions that never reach Redis (breaker
      // open, local fallback) would resolve in microtasks only and starve every timer.
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }

  /** Stops new calls, waits for those in flight, and measures the heap after a forced GC. */
  async function idleHeap(): Promise<NodeJS.MemoryUsage> {
    while (inFlight > 0) await delay(10)
    for (let i = 0; i < 3; i++) {
      forceGc()
      await delay(50)
    }
    return process.memoryUsage()
  }

  const began = performance.now()
  const elapsed = () => performance.now() - began
  let lastReport = began
  let restarts = 0
  let warmHeap: NodeJS.MemoryUsage | undefined
  const warmUpMs = Math.min(WARM_UP_MS, durationMs / 4)
  // Each restart leaves at least one report interval of the run to see the store come back.
  const plannedRestarts = Math.max(0, Math.floor((durationMs - REPORT_EVERY_MS) / RESTART_EVERY_MS))
  let nextRestartAt = plannedRestarts > 0 ? RESTART_EVERY_MS : Number.POSITIVE_INFINITY

  console.log(
    `Soak: ${seconds} s, ${CALLERS} callers, ${IP_IDENTIFIERS + USER_IDENTIFIERS} identifiers, redis-server on ${host}:${port} killed and restarted every ${RESTART_EVERY_MS / 1000} s, Node ${process.version}`,
  )
  const callers = Array.from({ length: CALLERS }, () => caller())

  function report(): void {
    const now = performance.now()
    const ms = now - lastReport
    lastReport = now
    const counts = interval
    interval = emptyCounts()
    addInto(total, counts)
    const { heapUsed, rss } = process.memoryUsage()
    console.log(
      [
        `${String(Math.round(elapsed() / 1000)).padStart(4)} s`,
        `${String(Math.round(counts.decisions / (ms / 1000))).padStart(6)} decisions/s`,
        `reasons ${formatReasons(counts.reasons)}`,
        `refunds ${counts.refunds} (TG_STORE ${counts.refundStoreErrors})`,
        `store errors ${counts.storeErrors}`,
        `thrown ${counts.thrown}`,
        `heap ${mb(heapUsed)}`,
        `rss ${mb(rss)}`,
        `breaker ${limiter.breakerState}`,
      ].join(' | '),
    )
  }

  let failure: unknown
  try {
    let nextReportAt = REPORT_EVERY_MS
    while (elapsed() < durationMs) {
      const nextEventAt = Math.min(nextReportAt, nextRestartAt, durationMs, warmHeap ? durationMs : warmUpMs)
      if (nextEventAt > elapsed()) await delay(nextEventAt - elapsed())
      if (warmHeap === undefined && elapsed() >= warmUpMs) {
        let resume = () => {}
        paused = new Promise((resolve) => {
          resume = resolve
        })
        warmHeap = await idleHeap()
        paused = undefined
        resume()
        console.log(`  warm: heap ${mb(warmHeap.heapUsed)}, rss ${mb(warmHeap.rss)} (idle, after forced GC)`)
      }
      if (elapsed() >= nextReportAt) {
        report()
        nextReportAt += REPORT_EVERY_MS
      }
      if (elapsed() >= nextRestartAt) {
        restarts++
        nextRestartAt = restarts < plannedRestarts ? (restarts + 1) * RESTART_EVERY_MS : Number.POSITIVE_INFINITY
        const downAt = elapsed()
        redis.kill('SIGKILL')
        await redis.stop()
        await delay(DOWN_MS)
        redis = await spawnRedisServer({ port })
        console.log(
          `  redis-server killed at ${(downAt / 1000).toFixed(1)} s, back at ${(elapsed() / 1000).toFixed(1)} s`,
        )
      }
    }
  } catch (error) {
    failure = error
  }
  stopping = true
  paused = undefined
  await Promise.all(callers)
  if (elapsed() - (lastReport - began) > 100) report()
  const endHeap = await idleHeap()
  await limiter.close()
  client.disconnect()
  await redis.stop()

  if (failure) {
    console.error('Soak aborted:', failure)
    return 1
  }
  const baseline = warmHeap ?? start
  const slack = Math.max(baseline.heapUsed * HEAP_SLACK_RATIO, HEAP_SLACK_BYTES)
  const grew = endHeap.heapUsed - baseline.heapUsed > slack
  console.log(
    [
      '',
      `Totals: ${total.decisions} decisions in ${(elapsed() / 1000).toFixed(1)} s (${Math.round(total.decisions / (elapsed() / 1000))}/s)`,
      `  reasons ${formatReasons(total.reasons)}`,
      `  refunds ${total.refunds}, refunds rejected with TG_STORE ${total.refundStoreErrors}`,
      `  store errors ${total.storeErrors}, connection errors ${connectionErrors}, thrown ${total.thrown}`,
      `  redis restarts ${restarts}, breaker changes ${breakerChanges.length} (${summarize(breakerChanges)})`,
      `Memory: start heap ${mb(start.heapUsed)} rss ${mb(start.rss)}; warm heap ${mb(baseline.heapUsed)} rss ${mb(baseline.rss)}; end heap ${mb(endHeap.heapUsed)} rss ${mb(endHeap.rss)} (warm and end idle, after forced GC)`,
      `  end heap − warm heap = ${signedMb(endHeap.heapUsed - baseline.heapUsed)}, tolerated +${mb(slack)}`,
      grew ? 'memory grew' : 'memory flat',
    ].join('\n'),
  )
  if (total.thrown > 0) console.log(`FAIL: ${total.thrown} decision(s) threw`)
  return total.thrown > 0 || grew ? 1 : 0
}

function secondsOf(argv: readonly string[]): number {
  const index = argv.indexOf('--seconds')
  if (index === -1) return 60
  const value = Number(argv[index + 1])
  if (!Number.isInteger(value) || value < 1) {
    console.error(`--seconds takes a whole number of seconds ≥ 1, got ${argv[index + 1]}`)
    process.exit(2)
  }
  return value
}

function emptyCounts(): Counts {
  return { decisions: 0, reasons: new Map(), refunds: 0, refundStoreErrors: 0, thrown: 0, storeErrors: 0 }
}

function addInto(total: Counts, counts: Counts): void {
  total.decisions += counts.decisions
  total.refunds += counts.refunds
  total.refundStoreErrors += counts.refundStoreErrors
  total.thrown += counts.thrown
  total.storeErrors += counts.storeErrors
  for (const [reason, n] of counts.reasons) total.reasons.set(reason, (total.reasons.get(reason) ?? 0) + n)
}

function formatReasons(reasons: ReadonlyMap<DecisionReason, number>): string {
  return [...reasons].map(([reason, n]) => `${reason} ${n}`).join(', ') || 'none'
}

function summarize(states: readonly string[]): string {
  const counts = new Map<string, number>()
  for (const state of states) counts.set(state, (counts.get(state) ?? 0) + 1)
  return [...counts].map(([state, n]) => `${state} ×${n}`).join(', ') || 'none'
}

function signedMb(bytes: number): string {
  return `${bytes < 0 ? '−' : '+'}${mb(Math.abs(bytes))}`
}

function mb(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MB`
}
