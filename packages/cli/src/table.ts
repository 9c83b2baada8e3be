import { stripVTControlCharacters } from 'node:util'

export interface Column<Row> {
  readonly header: string
  readonly value: (row: Row) => string
  /** Numbers read best aligned on their last digit. */
  readonly align?: 'left' | 'right'
}

/** Rows under a header, each column as wide as its widest cell; colours do not count toward width. */
export function table<Row>(
  columns: ReadonlyArray<Column<Row>>,
  rows: readonly Row[],
  header: (text: string) => string,
): string {
  const cells = rows.map((row) => columns.map((column) => column.value(row)))
  const widths = columns.map((column, i) =>
    Math.max(column.header.length, ...cells.map((line) => visibleLength(line[i] as string))),
  )
  const line = (values: readonly string[], style = (text: string) => text) =>
    values
      .map((value, i) => {
        const pad = ' '.repeat((widths[i] as number) - visibleLength(value))
        const last = i === values.length - 1
        if (columns[i]?.align === 'right') return pad + style(value)
        return last ? style(value) : style(value) + pad
      })
      .join('  ')
      .trimEnd()
  return [
    line(
      columns.map((column) => column.header),
      header,
    ),
    ...cells.map((values) => line(values)),
  ].join('\n')
}

function visibleLength(text: string): number {
  return stripVTControlCharacters(text).length
}
