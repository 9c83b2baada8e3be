import { createInterface } from 'node:readline/promises'
import { CliError } from './errors.js'
import type { Io } from './io.js'

/**
 * Asks on the terminal before a destructive command (the question on stderr, so that stdout stays
 * the command's output). `--yes` answers for the user; without a terminal to ask on and without
 * `--yes`, nothing is done and the command exits 2: a script must say `--yes` to mean it.
 */
export async function confirm(io: Io, question: string, yes: boolean, what: string): Promise<void> {
  if (yes) return
  if (io.stdin.isTTY !== true) {
    throw new CliError(
      'TG_UNCONFIRMED',
      `${what} needs confirmation, and stdin is not a terminal to ask on: nothing was changed; pass --yes to confirm`,
    )
  }
  const prompt = createInterface({ input: io.stdin, output: io.stderr })
  try {
    const answer = await prompt.question(`${question} [y/N] `)
    if (!/^\s*y(es)?\s*$/i.test(answer)) throw new CliError('TG_ABORTED', `${what} declined: nothing was changed`)
  } finally {
    prompt.close()
  }
}
