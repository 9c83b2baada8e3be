import { type Colors, colorsFor } from './colors.js'
import { codeOf, messageOf } from './errors.js'
import type { Io } from './io.js'
import { type Column, table } from './table.js'

/**
 * What a command prints. With `--json`, stdout carries exactly one JSON document, the command's
 * result (or `{ "error": … }`), and everything meant for people goes to stderr; without it,
 * results are rendered as text for people.
 */
export class Output {
  /** Colours for stdout. */
  readonly color: Colors
  private readonly errorColor: Colors

  constructor(
    private readonly io: Io,
    readonly json: boolean,
  ) {
    this.color = colorsFor(io.stdout, io.env)
    this.errorColor = colorsFor(io.stderr, io.env)
  }

  /** The command's result: as JSON with `--json`, else as `render` prints it. */
  result<T>(value: T, render: (value: T) => string): void {
    if (this.json) this.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
    else {
      const text = render(value)
      if (text !== '') this.io.stdout.write(text.endsWith('\n') ? text : `${text}\n`)
    }
  }

  /** Text for people on stdout, before the result: nothing with `--json`. */
  print(text: string): void {
    if (!this.json) this.io.stdout.write(`${text}\n`)
  }

  table<Row>(columns: ReadonlyArray<Column<Row>>, rows: readonly Row[]): string {
    return table(columns, rows, this.color.bold)
  }

  /** A note for people, on stderr whatever the mode. */
  note(text: string): void {
    this.io.stderr.write(`${text}\n`)
  }

  /** A failure on stderr only, for a command whose result already says it failed. */
  problem(message: string, code?: string): void {
    const label = this.errorColor.red(code ? `error ${code}:` : 'error:')
    this.io.stderr.write(`${label} ${message}\n`)
  }

  warn(message: string, code?: string): void {
    const label = this.errorColor.yellow(code ? `warning ${code}:` : 'warning:')
    this.io.stderr.write(`${label} ${message}\n`)
  }

  /** A failure: on stderr, and with `--json` as `{ "error": { code, message } }` on stdout too. */
  error(error: unknown): void {
    const code = codeOf(error)
    const message = messageOf(error)
    this.problem(message, code)
    if (this.json) this.io.stdout.write(`${JSON.stringify({ error: { code: code ?? null, message } }, null, 2)}\n`)
  }
}
