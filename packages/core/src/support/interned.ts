/**
 * `text` as V8 keeps property names: one copy per content, in its string table. Two such texts
 * are compared by reference; any other pair, even one string compared with itself, by a call
 * into V8 that reads their contents. A name made at run time (a rule's state name, an algorithm
 * read from a file) that a decision compares on every call is kept this way once, when it is
 * made. The text is the same: only how V8 holds it differs.
 */
export function interned(text: string): string {
  // A computed property name is interned, and Object.keys hands back the interned copy.
  return Object.keys({ [text]: 0 })[0] as string
}
