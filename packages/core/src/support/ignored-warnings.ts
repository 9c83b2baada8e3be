import { describeValue, TollgateConfigError } from './errors.js'
import type { WarningHandler } from './process-warning.js'

/**
 * The codes an `ignoreWarnings` option names, checked: an array of the codes the component can
 * emit (`known`), each a string. A code it does not know is refused rather than ignored in turn,
 * since a misspelt code would leave its warning on without a word.
 */
export function ignoredWarningsOf(raw: unknown, known: readonly string[], where: string): ReadonlySet<string> {
  if (raw === undefined) return NONE
  if (!Array.isArray(raw)) {
    throw new TollgateConfigError(
      `${where} ignoreWarnings must be an array of warning codes, such as ['${known[0]}'], got ${describeValue(raw)}`,
    )
  }
  for (const code of raw) {
    if (typeof code !== 'string' || !known.includes(code)) {
      throw new TollgateConfigError(
        `${where} ignoreWarnings: ${describeValue(code)} is not a warning code it emits; known codes are ${known.map((c) => `'${c}'`).join(', ')}`,
      )
    }
  }
  return new Set(raw as string[])
}

/** `onWarning` less the warnings of `ignored` codes. */
export function withoutIgnored(onWarning: WarningHandler, ignored: ReadonlySet<string>): WarningHandler {
  if (ignored.size === 0) return onWarning
  return (message, code) => {
    if (!ignored.has(code)) onWarning(message, code)
  }
}

const NONE: ReadonlySet<string> = new Set()
