import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { type AlgorithmName, createLimiter, MemoryStore } from '@tollgate/core'

/*
 * How much heap a MemoryStore holds per key, and that maxKeys bounds it: 1,000,000 distinct
 * identifiers, one admitted request each, against maxKeys 100,000 and the default 1,000,000.
 * Run with `pnpm --filter @tollgate/bench memory-bound`. Each configuration
 * runs in a process of its own, so that one's heap and RSS do not carry into the next.
 */

const CHECKPOINTS = [0, 250_000, 500_000, 1_000_000]
const DEFAULT_MAX_KEYS = 'default'
const CONFIGURATIONS: ReadonlyArray<[AlgorithmName, number | typeof DEFAULT_MAX_KEYS]> = [
  ['sliding-log', 100_000],
  ['sliding-log', DEFAULT_MAX_KEYS],
  ['fixed-window', 100_000],
  ['fixed-window', DEFAULT_MAX_KEYS],
]

const gc = globalThis.gc
if (typeof gc !== 'function') {
  console.error('Run with pnpm --filter @tollgate/bench memory-bound: the heap is measured after a forced GC')
  process.exit(2)
}

const configArg = process.argv.indexOf('--config')
if (configArg === -1) {
  console.log(
    `Node ${process.version}; one rule, one window of 100 per hour (nothing expires during the run), identifiers user:<n>; heap after a forced GC`,
  )
  console.log(
    '\n| algorithm | maxKeys | identifiers | store.size | store.evictions | heapUsed | RSS | bytes per key | s since last row |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const [algorithm, maxKeys] of CONFIGURATIONS) {
    // fork() passes this process's execArgv (--expose-gc --import tsx) on to the child.
    const child = fork(fileURLToPath(import.meta.url), ['--config', algorithm, String(maxKeys)], { stdio: 'inherit' })
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
    if (code !== 0) {
      console.error(`${algorithm} with maxKeys ${maxKeys} failed (exit code ${code})`)
      process.exit(1)
    }
  }
} else {
  await measure(
    process.argv[configArg + 1] as AlgorithmName,
    process.argv[configArg + 2] === DEFAULT_MAX_KEYS ? undefined : Number(process.argv[configArg + 2]),
    gc,
  )
}

async function measure(algorithm: AlgorithmName, maxKeys: number | undefined, forceGc: () => void): Promise<void> {
  const store = new MemoryStore(maxKeys === undefined ? {} : { maxKeys })
  const limiter = createLimiter({ store, rules: { r: { algorithm, windows: [{ limit: 100, period: '1h' }] } } })
  const heapAt = (): NodeJS.MemoryUsage => {
    forceGc()
    forceGc()
    return process.memoryUsage()
  }
  const empty = heapAt()
  let consumed = 0
  let since = performance.now()
  for (const checkpoint of CHECKPOINTS) {
    for (; consumed < checkpoint; consumed++) {
      // Built per request, as a server would: a key that retains its identifier is charged for it.
      const decision = await limiter.consume('r', `user:${consumed}`)
      if (!decision.allowed) throw new Error(`user:${consumed} was refused: every identifier is new`)
    }
    const seconds = ((performance.now() - since) / 1000).toFixed(1)
    const { heapUsed, rss } = consumed === 0 ? empty : heapAt()
    since = performance.now()
    const perKey = store.size === 0 ? '–' : String(Math.round((heapUsed - empty.heapUsed) / store.size))
    console.log(
      `| ${algorithm} | ${maxKeys === undefined ? '1,000,000 (default)' : maxKeys.toLocaleString('en')} | ${consumed.toLocaleString('en')} | ${store.size.toLocaleString('en')} | ${store.evictions.toLocaleString('en')} | ${mb(heapUsed)} | ${mb(rss)} | ${perKey} | ${seconds} |`,
    )
  }
  await limiter.close()
}

function mb(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MB`
}
