import type { LockoutState } from '../../algorithms/lockout.js'

const LOCKOUT_TEXT = /^(\d+) (\d+) (\d+) (\d+) (\d+)$/

/**
 * A block's key (`<state key>:block`) decoded as lua/lib/lockout.lua writes it, for tools that
 * show blocks (`tollgate inspect`, the admin view); undefined for text it never writes.
 * @example decodeLockoutState('1700000060000 60000 0 0 0')?.until // 1700000060000
 */
export function decodeLockoutState(text: string): LockoutState | undefined {
  const match = LOCKOUT_TEXT.exec(text)
  if (match === null) return undefined
  const [until, lastMs, refusals, firstAt, window] = match.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ]
  return { until, lastMs, refusals, firstAt, window }
}
