/** 0: done; 1: something failed (Redis, a rule, a check); 2: the command line itself is wrong. */
export type ExitCode = 0 | 1 | 2

/**
 * A failure the program names itself. `code` is what `--json` output carries in `error.code`,
 * beside the core's own codes (`TG_CONFIG`, `TG_STORE`, …).
 * - `TG_USAGE`: the command line is wrong or incomplete (exit 2).
 * - `TG_UNCONFIRMED`: a destructive command without a terminal to confirm on and without `--yes` (exit 2).
 * - `TG_ABORTED`: the confirmation was declined; nothing was changed (exit 1).
 * - `TG_REDIS`: Redis could not be reached (exit 1).
 */
export class CliError extends Error {
  constructor(
    readonly code: 'TG_USAGE' | 'TG_UNCONFIRMED' | 'TG_ABORTED' | 'TG_REDIS',
    message: string,
    readonly exitCode: ExitCode = code === 'TG_USAGE' || code === 'TG_UNCONFIRMED' ? 2 : 1,
  ) {
    super(message)
    this.name = 'CliError'
  }
}

export function usageError(message: string): CliError {
  return new CliError('TG_USAGE', message)
}

/** The code an error carries, for `--json` output: a CliError's, a Tollgate error's, or none. */
export function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
