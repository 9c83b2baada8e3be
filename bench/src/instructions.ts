// pnpm --filter @tollgate/bench instructions [--contenders id,…] [--shapes one-window,two-by-two]
//   [--runs 3] [--decisions 200000] [--in-flight 256]
//
// Instructions per in-process decision, counted by valgrind's cachegrind rather than timed: two
// processes per contender, one making --decisions more decisions than the other, and the
// difference of their instruction counts over --decisions. What start-up, module loading and
// compilation cost cancels out; what stays is the steady decision, with the loop, promises and
// awaits around it, which the `floor` row measures alone. V8 compiles on its own schedule, in
// either process of a pair, so pairs of one build differ by a tenth or more at times: each
// contender runs --runs pairs, and the median is the figure to compare. The decisions are those
// of the bench's decisions measure, 10,000 identifiers, on a limit never reached. Needs valgrind
// on PATH; Node runs single-threaded under it.
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { RuleShape } from './contenders/contender.js'
import { CONTENDERS, contenderById } from './contenders/index.js'

const here = dirname(fileURLToPath(import.meta.url))
const DEFAULT_CONTENDERS = [
  'floor',
  'express-rate-limit/memory',
  'tollgate/memory/fixed-window',
  'tollgate/memory/token-bucket',
  'tollgate/memory/gcra',
]
const { values } = parseArgs({
  options: {
    contenders: { type: 'string', default: DEFAULT_CONTENDERS.join(',') },
    shapes: { type: 'string', default: 'one-window,two-by-two' },
    runs: { type: 'string', default: '3' },
    decisions: { type: 'string', default: '200000' },
    'in-flight': { type: 'string', default: '256' },
  },
})
const runs = positive('runs', values.runs)
const decisions = positive('decisions', values.decisions)
const inFlight = positive('in-flight', values['in-flight'])
const BASE_DECISIONS = 50_000

function positive(name: string, text: string): number {
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer, got '${text}'`)
  return value
}

if (spawnSync('valgrind', ['--version']).error) {
  throw new Error('instructions needs valgrind on PATH (Debian: apt-get install valgrind)')
}

const ids = values.contenders.split(',').filter((id) => id !== '')
for (const id of ids) {
  if (id === 'floor') continue
  const contender = contenderById(id)
  if (contender.store !== 'memory' || contender.syncsWithRedis) {
    throw new Error(
      `${id} does not decide in the process alone; in-process contenders: ${CONTENDERS.filter(
        (c) => c.store === 'memory' && !c.syncsWithRedis,
      )
        .map((c) => c.id)
        .join(', ')}`,
    )
  }
}

/** Instructions of one process making `count` decisions. */
function instructionsOf(id: string, shape: RuleShape, count: number): number {
  const child = spawnSync(
    'valgrind',
    [
      '--tool=cachegrind',
      '--cache-sim=no',
      '--cachegrind-out-file=/dev/null',
      process.execPath,
      '--single-threaded',
      '--import',
      'tsx',
      '--import',
      join(here, 'built-tollgate.mjs'),
      join(here, 'instructions-worker.ts'),
      id,
      shape,
      String(count),
      String(inFlight),
    ],
    { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 * 1024 * 1024 },
  )
  const output = child.stderr
  if (child.status !== 0)
    throw new Error(`${id} failed under valgrind (status ${child.status}):\n${output.slice(-2_000)}`)
  const refs = /I\s+refs:\s+([\d,]+)/.exec(output)
  if (!refs) throw new Error(`no instruction count in cachegrind's output for ${id}:\n${output.slice(-2_000)}`)
  return Number((refs[1] as string).replaceAll(',', ''))
}

const median = (sorted: readonly number[]) => sorted[Math.floor((sorted.length - 1) / 2)] as number
const format = (n: number) => Math.round(n).toLocaleString('en-US')

interface Row {
  id: string
  shape: RuleShape
  median: number
  lowest: number
  highest: number
}

const rows: Row[] = []
for (const shape of values.shapes.split(',') as RuleShape[]) {
  for (const id of ids) {
    if (id !== 'floor' && !contenderById(id).shapes.includes(shape)) continue
    const perDecision: number[] = []
    for (let run = 0; run < runs; run++) {
      const more = instructionsOf(id, shape, BASE_DECISIONS + decisions)
      const base = instructionsOf(id, shape, BASE_DECISIONS)
      perDecision.push((more - base) / decisions)
    }
    perDecision.sort((a, b) => a - b)
    rows.push({
      id,
      shape,
      median: median(perDecision),
      lowest: perDecision[0] as number,
      highest: perDecision[perDecision.length - 1] as number,
    })
    process.stderr.write(`${id} ${shape}: ${perDecision.map(format).join(', ')}\n`)
  }
}

// The decisions measure compares every shape with express-rate-limit's one-window decision.
const incumbent = rows.find((row) => row.id === 'express-rate-limit/memory')
console.log(
  `Instructions per decision: a process's count after ${format(BASE_DECISIONS + decisions)} decisions less one's after ${format(BASE_DECISIONS)}, over ${format(decisions)}; ${inFlight} in flight; the median of ${runs} such pairs and their range.`,
)
console.log(
  '"Own" is the median less its shape\'s floor; "× express-rate-limit" is express-rate-limit\'s one-window median over the row\'s.\n',
)
console.log('| contender | shape | median | range | own | × express-rate-limit |')
console.log('| --- | --- | ---: | ---: | ---: | ---: |')
for (const row of rows) {
  const floor = rows.find((other) => other.id === 'floor' && other.shape === row.shape)
  const own = floor === undefined || row.id === 'floor' ? '' : format(row.median - floor.median)
  const ratio = incumbent === undefined || row.id === 'floor' ? '' : `×${(incumbent.median / row.median).toFixed(2)}`
  const range = `${format(row.lowest)}–${format(row.highest)}`
  console.log(`| ${row.id} | ${row.shape} | ${format(row.median)} | ${range} | ${own} | ${ratio} |`)
}
