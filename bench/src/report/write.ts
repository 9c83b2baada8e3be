import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { BenchResults } from '../results.js'
import { chartsOf } from './charts.js'
import { capacityMarkdown } from './hybrid-sync.js'
import { markdownOf } from './markdown.js'

const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'results')
const HYBRID_DOC = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'docs', 'hybrid.md')
const CAPACITY_START = '<!-- bench:hybrid-capacity:start -->'
const CAPACITY_END = '<!-- bench:hybrid-capacity:end -->'

/**
 * A full run writes `results/latest.md` and one SVG per measure; a quick or partial run writes
 * the same files under `results/raw/quick/`, so it never replaces a full run's. The raw JSON of
 * every run goes to `results/raw/`, which git ignores (`keepRaw`: a saved run is being re-rendered).
 */
export async function writeReport(
  results: BenchResults,
  options: { partial: boolean; keepRaw: boolean },
): Promise<{ markdown: string; files: string[] }> {
  const dir = results.config.quick || options.partial ? join(RESULTS_DIR, 'raw', 'quick') : RESULTS_DIR
  const rawDir = join(RESULTS_DIR, 'raw')
  await mkdir(dir, { recursive: true })
  await mkdir(rawDir, { recursive: true })
  const charts = await chartsOf(results)
  const markdown = markdownOf(
    results,
    charts.map((chart) => chart.file),
  )
  const files: string[] = []
  const write = async (path: string, content: string) => {
    await writeFile(path, content)
    files.push(relative(process.cwd(), path))
  }
  await write(join(dir, 'latest.md'), markdown)
  // docs/hybrid.md's capacity is the bench's to write, from the run results/latest.md holds: a full
  // run (or its report written again with --from) rewrites it between its markers, and nothing
  // else does.
  const capacity = dir === RESULTS_DIR ? capacityMarkdown(results) : undefined
  if (capacity !== undefined) {
    const doc = await readFile(HYBRID_DOC, 'utf8')
    const start = doc.indexOf(CAPACITY_START)
    const end = doc.indexOf(CAPACITY_END)
    if (start < 0 || end < start) throw new Error(`docs/hybrid.md has no ${CAPACITY_START} … ${CAPACITY_END} block`)
    await write(HYBRID_DOC, `${doc.slice(0, start + CAPACITY_START.length)}\n${capacity}\n${doc.slice(end)}`)
  }
  for (const chart of charts) await write(join(dir, chart.file), chart.svg)
  if (options.keepRaw) return { markdown, files }
  const stamp = results.startedAt.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z')
  await write(
    join(rawDir, `${stamp}${results.config.quick ? '-quick' : ''}.json`),
    `${JSON.stringify(results, null, 2)}\n`,
  )
  return { markdown, files }
}
