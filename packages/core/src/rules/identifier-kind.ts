const KIND = /^[A-Za-z][A-Za-z0-9._-]{0,31}$/

/** Whether `text` can be an identifier's kind: a short word, as `ip`, `user`, `org`. */
export function isIdentifierKind(text: string): boolean {
  return KIND.test(text)
}

/**
 * What an identifier counts, told apart from whom it counts: the part before its first `:`
 * (`ip`, `user`), when that part is a short word. Undefined otherwise, so that an identifier
 * without such a prefix is never taken for one and shown.
 * @example identifierKind('user:42') // 'user'
 */
export function identifierKind(identifier: string): string | undefined {
  const colon = identifier.indexOf(':')
  if (colon < 1 || colon > 32) return undefined
  const kind = identifier.slice(0, colon)
  return KIND.test(kind) ? kind : undefined
}
