import pc from 'picocolors'

export type Colors = ReturnType<typeof pc.createColors>

/**
 * Colours for one stream: on for a terminal, off otherwise; `NO_COLOR` (set and not empty, as
 * no-color.org asks) turns them off everywhere, `FORCE_COLOR` on where there is no terminal.
 */
export function colorsFor(stream: { isTTY?: boolean }, env: Readonly<Record<string, string | undefined>>): Colors {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return pc.createColors(false)
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false'
  return pc.createColors(forced || stream.isTTY === true)
}
