// pnpm --filter @tollgate/bench shedding-curve [--out <file>]
//
// One key offered six times its limit's rate, 60 requests a second against 100 per 10 s, on a
// sliding log, for six periods: once without lowBurst, where the window admits everything until
// the limit and then refuses everything (a saw-tooth of bursts), and once with lowBurst 50, where
// from half the limit on each request is shed with a probability that grows linearly to 1 at the
// limit. Decided by a MemoryStore on a simulated clock with a seeded random source, so a run
// always draws the same chart. Writes the admitted rate over time for both as an SVG
// (docs/shedding.svg by default) and prints what each window admitted.
import { writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { createLimiter, MemoryStore } from '@tollgate/core'
import { seededUniform } from '@tollgate/test-support/seeded-random'
import type { TopLevelSpec } from 'vega-lite'
import { render } from './report/charts.js'

const here = dirname(fileURLToPath(import.meta.url))
const { values } = parseArgs({ options: { out: { type: 'string' } } })
// pnpm runs the script in bench/; INIT_CWD is where the command was typed.
const out = values.out
  ? resolve(process.env.INIT_CWD ?? process.cwd(), values.out)
  : join(here, '..', '..', 'docs', 'shedding.svg')

const LIMIT = 100
const PERIOD_MS = 10_000
const LOW_BURST = LIMIT / 2
const OFFERED_PER_SECOND = (6 * LIMIT * 1_000) / PERIOD_MS
const WINDOWS = 6
const BIN_MS = 500
/** A start on a period boundary: the chart's grid shows the periods. */
const T0 = 1_700_000_000_000 - (1_700_000_000_000 % PERIOD_MS)

interface Run {
  series: string
  /** Admitted requests per second, per bin of BIN_MS. */
  rates: number[]
  /** Admitted requests per period of the run. */
  perWindow: number[]
}

async function run(series: string, lowBurst: number | undefined): Promise<Run> {
  let now = T0
  const window =
    lowBurst === undefined ? { limit: LIMIT, period: PERIOD_MS } : { limit: LIMIT, period: PERIOD_MS, lowBurst }
  const limiter = createLimiter({
    store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
    rules: { api: { algorithm: 'sliding-log', windows: [window] } },
    random: seededUniform(1),
  })
  /** When each admitted request came, in ms from the start. */
  const admitted: number[] = []
  const offered = (OFFERED_PER_SECOND * WINDOWS * PERIOD_MS) / 1_000
  for (let i = 0; i < offered; i++) {
    now = T0 + Math.floor((i * 1_000) / OFFERED_PER_SECOND)
    if ((await limiter.consume('api', 'ip:203.0.113.7')).allowed) admitted.push(now - T0)
  }
  await limiter.close()
  const bins = countsPer(admitted, BIN_MS)
  return { series, rates: bins.map((count) => (count * 1_000) / BIN_MS), perWindow: countsPer(admitted, PERIOD_MS) }
}

/** How many of `times` fall in each slice of `width` ms of the run. */
function countsPer(times: readonly number[], width: number): number[] {
  const counts = new Array<number>((WINDOWS * PERIOD_MS) / width).fill(0)
  for (const time of times) {
    const slice = Math.floor(time / width)
    counts[slice] = (counts[slice] ?? 0) + 1
  }
  return counts
}

const runs = [
  await run('no lowBurst: admit all, then refuse all', undefined),
  await run(`lowBurst ${LOW_BURST}: shed linearly from half the limit`, LOW_BURST),
]

const spec: TopLevelSpec = {
  $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
  title: {
    text: 'Admitted rate of one key offered 6× its limit',
    subtitle: `${OFFERED_PER_SECOND} requests/s against ${LIMIT} per ${PERIOD_MS / 1_000} s (sliding log), in ${BIN_MS} ms bins`,
  },
  width: 640,
  height: 260,
  data: {
    values: runs.flatMap(({ series, rates }) =>
      rates.map((rate, bin) => ({ series, seconds: (bin * BIN_MS) / 1_000, rate })),
    ),
  },
  layer: [
    {
      mark: { type: 'line', interpolate: 'step-after' },
      encoding: {
        x: { field: 'seconds', type: 'quantitative', title: 'time (s)' },
        y: { field: 'rate', type: 'quantitative', title: 'admitted requests per second' },
        color: {
          field: 'series',
          type: 'nominal',
          title: null,
          scale: { domain: runs.map((r) => r.series), range: ['#878787', '#d6604d'] },
          legend: { orient: 'top', labelLimit: 400 },
        },
      },
    },
    {
      data: { values: [{ rate: (LIMIT * 1_000) / PERIOD_MS }] },
      mark: { type: 'rule', strokeDash: [4, 4], color: '#4393c3' },
      encoding: { y: { field: 'rate', type: 'quantitative' } },
    },
  ],
}

writeFileSync(out, await render(spec))
process.stdout.write(`Wrote ${out}; the dashed line is the limit's average rate, ${(LIMIT * 1_000) / PERIOD_MS}/s.\n`)
process.stdout.write(`| series | admitted in each ${PERIOD_MS / 1_000} s |\n| --- | --- |\n`)
for (const { series, perWindow } of runs) process.stdout.write(`| ${series} | ${perWindow.join(', ')} |\n`)
