import { describeValue, TollgateConfigError } from '../support/errors.js'
import { identifierKind, isIdentifierKind } from './identifier-kind.js'

/**
 * The identifier a rule charged on no kind (`by: []`) counts under: one count that every caller
 * shares. A caller's own `'*'` could only meet it in a rule without `by`, whose state is another.
 */
export const EVERYONE = '*'

/** A rule's `by`, checked: kinds as identifiers spell them, none twice. */
export function chargedByOf(raw: unknown, where: string): readonly string[] {
  if (!Array.isArray(raw)) {
    throw new TollgateConfigError(
      `${where}: by must be an array of identifier kinds (such as ['user'], or [] for one count shared by every caller), got ${describeValue(raw)}`,
    )
  }
  raw.forEach((kind: unknown, index) => {
    if (typeof kind !== 'string' || !isIdentifierKind(kind)) {
      throw new TollgateConfigError(
        `${where}: by[${index}] must be an identifier kind, the part before ':' of an identifier such as 'user:42' (a letter, then up to 31 letters, digits, '.', '_' or '-'), got ${describeValue(kind)}`,
      )
    }
    if (raw.indexOf(kind) !== index) throw new TollgateConfigError(`${where}: by names '${kind}' twice`)
  })
  return Object.freeze([...raw])
}

/** Whether a rule charged on `by` (not empty) counts this identifier. */
export function chargesIdentifier(by: readonly string[], identifier: string): boolean {
  const kind = identifierKind(identifier)
  return kind !== undefined && by.includes(kind)
}
