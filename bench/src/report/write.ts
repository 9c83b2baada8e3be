import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { BenchResults } from '../results.js'
import { chartsOf } from './charts.js'
import { markdownOf } from './markdown.js'

const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'results')

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
  for (const chart of charts) await write(join(dir, chart.file), chart.svg)
  if (options.keepRaw) return { markdown, files }
  const stamp = results.startedAt.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z')
  await write(
    join(rawDir, `${stamp}${results.config.quick ? '-quick' : ''}.json`),
    `${JSON.stringify(results, null, 2)}\n`,
  )
  return { markdown, files }
}
