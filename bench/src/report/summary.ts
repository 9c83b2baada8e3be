import { wasBusy } from '../machine.js'
import type { BenchResults } from '../results.js'
import { targetsOf } from './targets.js'

/**
 * The README's Performance table: the targets that carry a headline, from the run
 * results/latest.md holds, written between markers there. Links are relative to the repository's
 * root, where the README is.
 */
export function summaryMarkdown(results: BenchResults): string | undefined {
  const rows = targetsOf(results).flatMap((row) =>
    row.headline === undefined ? [] : [[row.met ? '**met**' : '**missed**', row.headline, row.measured]],
  )
  if (rows.length === 0) return undefined
  const m = results.machine
  return [
    paddedTable(['', 'target', 'measured'], rows),
    '',
    `Measured by \`${results.command}\` on ${results.startedAt.slice(0, 10)} (${m.cpus} CPUs${wasBusy(m) ? ' busy with other work' : ''}, Node ${m.node}, Redis ${m.redis}); each ratio is taken within that run. Every target, table and chart of the run, with the machine and the method: [bench/results/latest.md](bench/results/latest.md).`,
  ].join('\n')
}

/** A table with its columns padded, as the repository's formatter writes Markdown tables, so that the README stays formatted. */
function paddedTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((_, i) => Math.max(3, ...[head, ...rows].map((row) => (row[i] ?? '').length)))
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i] as number)).join(' | ')} |`
  return [line(head), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n')
}
