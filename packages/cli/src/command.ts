import type { Command } from 'commander'
import type { Session } from './session.js'

/**
 * Wraps a command's action: makes its Session from the options on the command line (the
 * program's and the command's), runs it, prints what it throws, sets the exit code, and closes
 * what it opened.
 */
export type Run = <Args extends unknown[]>(
  action: (session: Session, ...args: Args) => Promise<void>,
) => (...commanderArgs: unknown[]) => Promise<void>

/**
 * One command of the program. A new command is one module that registers itself here and one
 * line in `commands/index.ts`; it finds the global options, output and connection in its Session.
 */
export interface CommandModule {
  register(parent: Command, run: Run): void
}
