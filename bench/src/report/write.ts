import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { BenchResults } from '../results.js'
import { chartsOf } from './charts.js'
import { capacityMarkdown } from './hybrid-sync.js'
import { markdownOf } from './markdown.js'
import { summaryMarkdown } from './summary.js'

const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'results')
const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

/**
 * Blocks of the repository's Markdown that the bench writes, each between
 * `<!-- bench:<name>:start -->` and `<!-- bench:<name>:end -->`, from the run results/latest.md holds.
 */
const GENERATED_BLOCKS = [
  { file: 'README.md', name: 'summary', render: summaryMarkdown },
  { file: 'docs/hybrid.md', name: 'hybrid-capacity', render: capacityMarkdown },
] as const

/** `doc` with the block `name` holding `content`; the markers stay, whatever was between them goes. */
function withBlock(doc: string, file: string, name: string, content: string): string {
  const startMarker = `<!-- bench:${name}:start -->`
  const endMarker = `<!-- bench:${name}:end -->`
  const start = doc.indexOf(startMarker)
  const end = doc.indexOf(endMarker)
  if (start < 0 || end < start) throw new Error(`${file} has no ${startMarker} … ${endMarker} block`)
  return `${doc.slice(0, start + startMarker.length)}\n${content}\n${doc.slice(end)}`
}

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
  // The generated blocks are the bench's to write, from the run results/latest.md holds: a full run
  // (or its report written again with --from) rewrites them between their markers, and nothing
  // else does, so that no figure there is ever copied by hand.
  if (dir === RESULTS_DIR) {
    for (const { file, name, render } of GENERATED_BLOCKS) {
      const content = render(results)
      if (content === undefined) continue
      const path = join(REPO_ROOT, file)
      await write(path, withBlock(await readFile(path, 'utf8'), file, name, content))
    }
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
