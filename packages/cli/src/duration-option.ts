import { parseDuration } from '@tollgate/core'
import { usageError } from './errors.js'

const BARE_NUMBER = /^\s*\d+\s*$/

/**
 * A duration flag's milliseconds: a number and a unit (`5m`, `90s`, `1.5h`), or a bare number of
 * milliseconds, as durations in code are everywhere in Tollgate. A bare number under a second is
 * told back on `note` (rules in code warn of it too): `--since 5` is 5 ms, never 5 minutes.
 * @example durationOption('--since', '5m') // 300000
 */
export function durationOption(flag: string, text: string, note?: (text: string) => void): number {
  const bare = BARE_NUMBER.test(text)
  const parsed = parseDuration(bare ? Number(text) : text)
  if (typeof parsed === 'string') {
    const why = bare
      ? parsed
      : `${JSON.stringify(text)} is not a duration: use a number and a unit, such as 5m, 90s, 1h or 500ms (units: ms, s, m, h, d, or their names), or a bare number of milliseconds`
    throw usageError(`${flag}: ${why}`)
  }
  if (bare && parsed < 1000) {
    note?.(
      `${flag} ${text.trim()} is ${parsed} ms (a bare number is milliseconds); write ${text.trim()}s or ${text.trim()}m for seconds or minutes`,
    )
  }
  return parsed
}
