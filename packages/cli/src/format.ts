import { formatDuration, type Rule, type Window } from '@tollgate/core'

/** `100/1m`, `5/3s`, with `~50` for a window that sheds from 50. */
export function windowText(window: Pick<Window, 'limit' | 'periodMs' | 'lowBurst'>): string {
  const shed = window.lowBurst === undefined ? '' : ` ~${window.lowBurst}`
  return `${window.limit}/${formatDuration(window.periodMs)}${shed}`
}

export function windowsText(rule: Pick<Rule, 'windows'>): string {
  return rule.windows.map(windowText).join(', ')
}

/** A rule's block as people read it: `15m after 3, ×2 up to 1d`. */
export function blockText(block: { forMs: number; after: number; factor: number; maxMs: number }): string {
  const after = block.after === 1 ? '' : ` after ${block.after}`
  const grows = block.factor === 1 ? '' : `, ×${block.factor} up to ${formatDuration(block.maxMs)}`
  return `${formatDuration(block.forMs)}${after}${grows}`
}

/** A span of time as people read it: `0.4ms`, `850ms`, `41.2s`, `3m20s`, `2h05m`, `3d04h`. */
export function span(ms: number): string {
  if (ms < 10) return `${(Math.round(ms * 10) / 10).toFixed(1)}ms`
  if (ms < 1_000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)}s`
  const s = Math.floor(ms / 1_000)
  if (s < 3_600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`
  if (s < 86_400) return `${Math.floor(s / 3_600)}h${pad(Math.floor(s / 60) % 60)}m`
  return `${Math.floor(s / 86_400)}d${pad(Math.floor(s / 3_600) % 24)}h`
}

function pad(n: number): string {
  return String(n).padStart(2, '0')
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString()
}
