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
import { contenderById, IN_PROCESS_CONTENDERS } from './contenders/index.js'
import { integer, ratio, table } from './report/format.js'
import { max, median, min } from './stats.js'

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

/** The contenders that decide in the process with no Redis at all: a HybridStore syncs on a timer, which valgrind's pace would spread over its decisions. */
const MEASURABLE = IN_PROCESS_CONTENDERS.filter((contender) => !contender.syncsWithRedis)

const ids = values.contenders.split(',').filter((id) => id !== '')
for (const id of ids) {
  if (id !== 'floor' && !MEASURABLE.includes(contenderById(id))) {
    throw new Error(
      `${id} does not decide in the process alone; those that do: ${MEASURABLE.map((c) => c.id).join(', ')}`,
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
    rows.push({ id, shape, median: median(perDecision), lowest: min(perDecision), highest: max(perDecision) })
    process.stderr.write(`${id} ${shape}: ${perDecision.map((n) => integer(n)).join(', ')}\n`)
  }
}

// The decisions measure compares every shape with express-rate-limit's one-window decision.
const incumbent = rows.find((row) => row.id === 'express-rate-limit/memory')
console.log(
  `Instructions per decision: a process's count after ${integer(BASE_DECISIONS + decisions)} decisions less one's after ${integer(BASE_DECISIONS)}, over ${integer(decisions)}; ${inFlight} in flight; the median of ${runs} such pairs and their range.`,
)
console.log(
  '"Own" is the median less its shape\'s floor; "× express-rate-limit" is express-rate-limit\'s one-window median over the row\'s.\n',
)
console.log(
  table(
    ['contender', 'shape', 'median', 'range', 'own', '× express-rate-limit'],
    rows.map((row) => {
      const floor = rows.find((other) => other.id === 'floor' && other.shape === row.shape)
      const own = floor === undefined || row.id === 'floor' ? '' : integer(row.median - floor.median)
      const versus = incumbent === undefined || row.id === 'floor' ? '' : ratio(incumbent.median / row.median)
      const range = `${integer(row.lowest)}–${integer(row.highest)}`
      return [row.id, row.shape, integer(row.median), range, own, versus]
    }),
    ['l', 'l', 'r', 'r', 'r', 'r'],
  ),
)
